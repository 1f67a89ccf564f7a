#include "engine_bench.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>

#include "absl/synchronization/notification.h"
#include "engine_gpu_bench.h"
#include "engine_impl.h"
#include "flotilla/inference/safetensors.h"
#include "flotilla/inference/tokenizer.h"
#include "weights.h"

namespace flotilla::bench {

using inference::Engine;
using inference::EngineOptions;
using inference::GenerateRequest;
using inference::GenerateUpdate;
using inference::ModelConfig;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

DecodeRun RunDecode(Engine* engine, const std::string& model, int batch, int prompt_len, int new_tokens) {
  std::mutex mu;
  int started = 0, finished = 0;
  Clock::time_point t0, t1;
  absl::Notification done;
  DecodeRun run;
  run.records.resize(static_cast<size_t>(batch));
  // The whole batch is submitted before its first step: every sequence decodes in lockstep,
  // so each timed step runs `batch` rows.
  auto* impl = dynamic_cast<inference::EngineImpl*>(engine);
  if (impl != nullptr) impl->HoldSteps(true);
  for (int b = 0; b < batch; ++b) {
    GenerateRequest req;
    req.model = model;
    for (int i = 0; i < prompt_len; ++i) req.prompt.push_back((b * 31 + i * 7) % 256);
    req.sampling.temperature = 1.0f;
    req.sampling.seed = static_cast<uint64_t>(b + 1);
    req.sampling.max_new_tokens = static_cast<uint32_t>(new_tokens);
    req.sampling.stop_tokens = {-1};
    auto id = engine->Generate(req, [&, b](const GenerateUpdate& u) {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& t : u.tokens) {
        if (run.records[b].empty() && ++started == batch) t0 = Clock::now();
        run.records[b].push_back(t);
      }
      if (u.finish != inference::FinishReason::kRunning && ++finished == batch) {
        t1 = Clock::now();
        done.Notify();
      }
    });
    if (!id.ok()) {
      std::cerr << "generate: " << id.status() << "\n";
      if (impl != nullptr) impl->HoldSteps(false);
      return run;
    }
  }
  if (impl != nullptr) impl->HoldSteps(false);
  done.WaitForNotification();
  run.seconds = Seconds(t0, t1);
  run.tokens_per_second = batch * (new_tokens - 1) / run.seconds;
  return run;
}

namespace {

std::string RunCommand(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

double ParseValue(const std::string& text, const std::string& key) {
  size_t at = text.find(key + "=");
  return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + key.size() + 1);
}

int RunCpu(const EngineBenchOptions& o) {
  char tmpl[] = "/tmp/flotilla-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  ModelConfig c;  // the default model
  const std::string config_path = dir + "/model.json", weights_path = dir + "/model.safetensors";
  std::ofstream(config_path) << c.ToJson();
  {
    auto w = inference::ModelWeights::Random(c, 1, 0.02f, 0);
    inference::ModelWeights copy = *w;
    std::vector<inference::TensorToWrite> out;
    for (const auto& s : inference::TensorSlots(copy)) out.push_back({s.name, s.shape, s.dst->data(), inference::DType::kF32});
    if (!inference::WriteSafetensors(weights_path, out).ok()) return 1;
  }
  EngineOptions opts;
  opts.threads = o.cpu_threads;
  opts.kv_memory_bytes = 1ull << 30;
  auto engine = Engine::Create(opts);
  if (!engine.ok() || !(*engine)->LoadModel("m", c, weights_path, 1).ok()) return 1;
  std::printf("engine.cpu_model_params=%llu\nengine.cpu_threads=%d\n",
              static_cast<unsigned long long>(c.parameter_count()), o.cpu_threads);
  constexpr int kPrompt = 16;
  RunDecode(engine->get(), "m", 1, kPrompt, 8);  // warm-up
  const double b1 = RunDecode(engine->get(), "m", 1, kPrompt, o.new_tokens).tokens_per_second;
  const double b32 = RunDecode(engine->get(), "m", 32, kPrompt, o.new_tokens).tokens_per_second;
  std::printf("engine.cpu_decode_tps_b1=%.1f\nengine.cpu_decode_tps_b32=%.1f\n", b1, b32);
  std::fflush(stdout);

  std::string src = o.source_dir;
  if (src.empty()) src = std::getenv("FLOTILLA_SOURCE_DIR") != nullptr ? std::getenv("FLOTILLA_SOURCE_DIR") : ".";
  const std::string torch_out = RunCommand("FLOTILLA_SOURCE_DIR='" + src + "' /usr/bin/python3 '" + src +
                                           "/bench/engine_torch_bench.py' '" + config_path + "' '" + weights_path +
                                           "' " + std::to_string(kPrompt) + " " + std::to_string(o.new_tokens) + " 1 32");
  std::printf("%s", torch_out.c_str());
  const double t1 = ParseValue(torch_out, "torch.decode_tps_b1"), t32 = ParseValue(torch_out, "torch.decode_tps_b32");
  if (t1 > 0 && t32 > 0) {
    std::printf("engine.cpu_vs_torch_b1=%.2f\nengine.cpu_vs_torch_b32=%.2f\nengine.cpu_vs_torch=%.2f\n", b1 / t1,
                b32 / t32, std::min(b1 / t1, b32 / t32));
  } else {
    std::printf("engine.cpu_vs_torch=unavailable (the PyTorch run failed)\n");
  }

  // Resume from kept KV against re-prefilling the same context.
  GenerateRequest req;
  req.model = "m";
  for (int i = 0; i < o.resume_context; ++i) req.prompt.push_back((i * 13 + 5) % 256);
  req.sampling.temperature = 1.0f;
  req.sampling.max_new_tokens = 1;
  req.sampling.stop_tokens = {-1};
  req.keep_state = true;
  auto t_a = Clock::now();
  auto first = (*engine)->GenerateBlocking(req);
  const double prefill_s = Seconds(t_a, Clock::now());
  if (!first.ok()) return 1;
  const uint64_t prefill_before = (*engine)->Stats().prefill_tokens;
  absl::Notification resumed;
  auto t_b = Clock::now();
  Clock::time_point t_tok;
  if (!(*engine)->Resume(first->sequence_id, req.sampling, [&](const GenerateUpdate& u) {
        if (u.finish != inference::FinishReason::kRunning) {
          t_tok = Clock::now();
          resumed.Notify();
        }
      }).ok()) {
    return 1;
  }
  resumed.WaitForNotification();
  const double resume_s = Seconds(t_b, t_tok);
  std::printf("engine.reprefill_ms_ctx%d=%.1f\nengine.resume_ms_ctx%d=%.2f\nengine.resume_prefill_tokens=%llu\n",
              o.resume_context, prefill_s * 1e3, o.resume_context, resume_s * 1e3,
              static_cast<unsigned long long>((*engine)->Stats().prefill_tokens - prefill_before));
  std::printf("engine.resume_vs_reprefill=%.4f\n", resume_s / prefill_s);
  std::string rm = "rm -rf '" + dir + "'";
  (void)!std::system(rm.c_str());
  return 0;
}

}  // namespace

int RunEngineBench(const EngineBenchOptions& options) {
  int rc = 0;
  if (options.cpu) rc |= RunCpu(options);
  if (options.gpu) rc |= RunGpuBench(options.gpu_forward_only);
  return rc;
}

}  // namespace flotilla::bench
