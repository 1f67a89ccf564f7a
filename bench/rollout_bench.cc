#include "rollout_bench.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/clock.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_runner.h"

namespace flotilla::bench {
namespace {

using trainer_bridge::DatasetConfig;
using trainer_bridge::RolloutConfig;
using trainer_bridge::RolloutController;
using trainer_bridge::RolloutRunner;
using trainer_bridge::RunnerOptions;

inference::ModelConfig BenchModel() {
  inference::ModelConfig c;
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.n_experts = 4;
  c.top_k = 2;
  c.expert_hidden = 32;
  c.max_context = 4200;
  return c;
}

// The same length for a sample index in every mode.
uint32_t LengthOf(const RolloutBenchOptions& o, uint64_t sample) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull ^ (sample + 1) * 0xBF58476D1CE4E5B9ull);
  std::lognormal_distribution<double> d(std::log(o.median), o.sigma);
  return static_cast<uint32_t>(std::clamp<double>(std::round(d(rng)), 1.0, o.cap));
}

struct ModeResult {
  double seconds = 0;
  double trainer_busy_s = 0;
  double stall_ms_mean = 0;
  double stall_ms_max = 0;
  uint64_t tokens = 0;
  uint64_t prefill_on_resume = 0;
};

ModeResult RunMode(const RolloutBenchOptions& o, inference::Engine& engine, const std::string& weights,
                   uint32_t eta, double train_s) {
  RolloutConfig rc;
  rc.group_size = o.group_size;
  rc.groups_per_step = o.prompts_per_step;
  rc.max_in_flight = o.prompts_per_step * o.group_size;
  rc.staleness = eta;
  rc.length_bias.enabled = false;
  RolloutController controller(rc, {DatasetConfig{"longtail", "builtin:copy", "longtail", 1, 0}}, {},
                               SystemClock::Get());
  std::map<std::string, std::unique_ptr<trainer_bridge::TaskSource>> tasks;
  tasks["longtail"] = std::move(*trainer_bridge::TaskSource::Open("builtin:copy?len=8", o.seed));
  RunnerOptions ro;
  ro.model = "bench";
  ro.seed = o.seed;
  ro.forced_length = [&o](uint64_t s) { return LengthOf(o, s); };
  RolloutRunner runner(ro, engine, controller, std::move(tasks), nullptr, nullptr, SystemClock::Get());
  (void)engine.UpdateWeights("bench", weights, 0);
  controller.SetPolicyVersion(0);
  Stopwatch total;
  ModeResult r;
  if (!runner.Start().ok()) return r;
  int64_t version = 0;
  for (uint32_t step = 0; step < o.steps; ++step) {
    auto groups = runner.TakeGroups(o.prompts_per_step, nullptr);
    Stopwatch busy;
    std::this_thread::sleep_for(std::chrono::duration<double>(train_s));
    auto sw = runner.SwitchWeights(weights, ++version);
    r.trainer_busy_s += busy.ElapsedMillis() / 1000.0;
    if (sw.ok()) {
      r.stall_ms_mean += sw->stall_ms / o.steps;
      r.stall_ms_max = std::max(r.stall_ms_max, sw->stall_ms);
      r.prefill_on_resume += sw->prefilled_on_resume;
    }
    std::cerr << absl::StrFormat("bench rollout: eta=%d step=%d/%d elapsed=%.1fs\n", eta, step + 1, o.steps,
                                 total.ElapsedMillis() / 1000.0);
  }
  r.seconds = total.ElapsedMillis() / 1000.0;
  r.tokens = runner.Stats().tokens_generated;
  runner.Stop();
  return r;
}

}  // namespace

int RunRolloutBench(const RolloutBenchOptions& o) {
  std::string dir = o.work_dir;
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / absl::StrCat("flotilla-rollout-bench-", getpid())).string();
  std::filesystem::create_directories(dir);
  std::string cfg_path = dir + "/bench.json";
  std::string weights = dir + "/bench.safetensors";
  std::ofstream(cfg_path) << BenchModel().ToJson();
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  std::string pypath = absl::StrCat(src != nullptr ? src : FLOTILLA_BUILD_SOURCE_DIR, "/trainer_bridge/python");
  std::string cmd = absl::StrCat("PYTHONPATH='", pypath, "' /usr/bin/python3 -m flotilla_trainer.init_model --out '", dir,
                                 "/bench' --config '", cfg_path, "' --seed 3 --std 0.05");
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "bench rollout: writing the random model failed: " << cmd << "\n";
    return 1;
  }
  inference::EngineOptions eo;
  eo.threads = o.threads;
  eo.max_batch = o.prompts_per_step * o.group_size;
  eo.kv_memory_bytes = 4ull << 30;
  eo.max_step_tokens = 8192;
  auto engine = inference::Engine::Create(eo);
  if (!engine.ok() || !(*engine)->LoadModel("bench", BenchModel(), weights, 0).ok()) {
    std::cerr << "bench rollout: engine set-up failed\n";
    return 1;
  }
  // Calibration: one median-length group on the idle engine is the trainer's step time.
  Stopwatch cal;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < o.group_size; ++i) {
    threads.emplace_back([&, i] {
      inference::GenerateRequest req;
      req.model = "bench";
      req.prompt = {inference::kBos, inference::kUser, 'h', 'i', inference::kEndTurn, inference::kAssistant};
      req.sampling.max_new_tokens = static_cast<uint32_t>(o.median);
      req.sampling.stop_tokens = {-1};
      req.sampling.seed = i;
      (void)(*engine)->GenerateBlocking(req);
    });
  }
  for (auto& t : threads) t.join();
  double train_s = cal.ElapsedMillis() / 1000.0;
  std::cerr << absl::StrFormat("bench rollout: trainer step = one median group = %.3fs\n", train_s);

  ModeResult sync = RunMode(o, **engine, weights, 0, train_s);
  ModeResult async = RunMode(o, **engine, weights, o.eta, train_s);
  auto idle = [](const ModeResult& m) { return m.seconds > 0 ? 1.0 - m.trainer_busy_s / m.seconds : 0.0; };
  std::cout << absl::StrFormat("rollout.steps=%d\nrollout.prompts_per_step=%d\nrollout.group_size=%d\n", o.steps,
                               o.prompts_per_step, o.group_size);
  std::cout << absl::StrFormat("rollout.trainer_step_s=%.3f\n", train_s);
  std::cout << absl::StrFormat("rollout.sync_seconds=%.2f\nrollout.async_seconds=%.2f\n", sync.seconds, async.seconds);
  std::cout << absl::StrFormat("rollout.sync_tokens_per_s=%.0f\nrollout.async_tokens_per_s=%.0f\n",
                               sync.tokens / std::max(sync.seconds, 1e-9), async.tokens / std::max(async.seconds, 1e-9));
  std::cout << absl::StrFormat("rollout.async_vs_sync=%.2f\n", sync.seconds / std::max(async.seconds, 1e-9));
  std::cout << absl::StrFormat("rollout.trainer_idle_fraction.sync=%.3f\nrollout.trainer_idle_fraction.async=%.3f\n",
                               idle(sync), idle(async));
  std::cout << absl::StrFormat("rollout.switch_stall_ms=%.2f\nrollout.switch_stall_ms_max=%.2f\n", async.stall_ms_mean,
                               async.stall_ms_max);
  std::cout << absl::StrFormat("rollout.prefill_tokens_on_resume=%d\n", async.prefill_on_resume + sync.prefill_on_resume);
  std::error_code ec;
  if (o.work_dir.empty()) std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace flotilla::bench
