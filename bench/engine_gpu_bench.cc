#include "engine_gpu_bench.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "engine_impl.h"

#ifdef FLOTILLA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace flotilla::bench {

#ifndef FLOTILLA_HAVE_CUDA
int RunGpuBench(bool) {
  std::printf("engine.gpu=unavailable (built without CUDA)\n");
  return 0;
}
#else
double MeasureCopyBandwidth() {
  const size_t bytes = size_t{4} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(e0);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (i >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3);
}

namespace {

// Decode through the engine at batch 1, 64, 256; prints each batch's figures and returns the
// roofline fraction at 256 (0 when the engine could not be set up).
double DecodeAgainstRoofline(const inference::ModelConfig& c, double bw) {
  inference::EngineOptions opts;
  opts.backend = "cuda";
  opts.max_batch = 256;
  opts.max_step_tokens = 8192;
  opts.kv_memory_bytes = 8ull << 30;
  // FLOTILLA_BENCH_OVERLAP=0|1 forces EngineOptions::overlap_delivery (comparison runs).
  if (const char* overlap = std::getenv("FLOTILLA_BENCH_OVERLAP")) opts.overlap_delivery = std::atoi(overlap);
  auto created = inference::Engine::Create(opts);
  if (!created.ok()) return 0;
  auto* engine = static_cast<inference::EngineImpl*>(created->get());
  if (absl::Status s = engine->InstallRandomModel("big", c, 1, 0.02f, 1); !s.ok()) {
    std::printf("engine.gpu=error (%s)\n", std::string(s.message()).c_str());
    return 0;
  }
  const double D = c.d_model, F = c.expert_hidden, hd = c.head_dim;
  const double expert_bytes = 3.0 * D * F * 2;
  const double dense_bytes_per_layer = D * hd * (2.0 * c.n_heads + 2.0 * c.n_kv_heads) * 2 +
                                       c.n_experts * D * 2 + c.n_shared_experts * expert_bytes + 2 * D * 4;
  const double head_bytes = 2.0 * c.vocab_size * D * 2;
  const double kv_bytes_per_token_layer = 2.0 * c.n_kv_heads * hd * 2;
  std::printf("engine.gpu_model_params=%llu\n", static_cast<unsigned long long>(c.parameter_count()));
  constexpr int kPrompt = 32;
  const int kNew = 64;
  RunDecode(engine, "big", 8, kPrompt, 4);  // warm-up
  double frac256 = 0;
  for (int batch : {1, 64, 256}) {
    DecodeRun run = RunDecode(engine, "big", batch, kPrompt, kNew);
    // Bytes the decode window must move: every weight the step touches (experts counted from
    // the recorded routing) plus every KV entry the step reads.
    double bytes = 0;
    for (int j = 1; j < kNew; ++j) {
      // Token j of every sequence comes from the same step (they run in lockstep); its
      // experts are the routing of that step's rows.
      for (int l = 0; l < c.n_layers; ++l) {
        std::set<int32_t> touched;
        for (const auto& rec : run.records) {
          for (int k = 0; k < c.top_k; ++k) touched.insert(rec[j].experts[l * c.top_k + k]);
        }
        bytes += dense_bytes_per_layer + touched.size() * expert_bytes;
      }
      bytes += head_bytes;
      bytes += static_cast<double>(batch) * (kPrompt + j) * c.n_layers * kv_bytes_per_token_layer;
    }
    const double achieved = bytes / run.seconds;
    const double frac = achieved / bw;
    if (batch == 256) frac256 = frac;
    std::printf("engine.gpu_decode_tps_b%d=%.1f\nengine.gpu_step_ms_b%d=%.3f\nengine.gpu_bytes_per_s_b%d=%.3e\n"
                "engine.gpu_roofline_frac_b%d=%.3f\n",
                batch, run.tokens_per_second, batch, run.seconds * 1e3 / (kNew - 1), batch, achieved, batch, frac);
    std::fflush(stdout);
  }
  std::printf("engine.gpu_roofline_frac=%.3f\n", frac256);
  created->reset();  // frees the engine's weights and KV before the backend-only runs
  return frac256;
}

}  // namespace

int RunGpuBench(bool forward_only) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("engine.gpu=unavailable (no CUDA device)\n");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("engine.gpu_device=%s\n", prop.name);
  const double bw = forward_only ? 0 : MeasureCopyBandwidth();
  if (!forward_only) std::printf("engine.gpu_copy_bandwidth_gbps=%.0f\n", bw / 1e9);

  inference::ModelConfig c;
  c.vocab_size = 272;
  c.n_layers = 16;
  c.d_model = 4096;
  c.n_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.n_experts = 16;
  c.top_k = 2;
  c.n_shared_experts = 1;
  c.expert_hidden = 2048;
  c.max_context = 4096;
  const double frac256 = forward_only ? 0 : DecodeAgainstRoofline(c, bw);
  // The backend's forward step alone (no scheduling, sampling or delivery): where the time goes.
  auto backend = inference::CreateCudaBackend(c, 16, 4ull << 30);
  if (backend.ok() && (*backend)->SetRandomWeights(1, 0.02f).ok()) {
    const std::vector<int> batches = forward_only ? std::vector<int>{256} : std::vector<int>{1, 64, 256};
    for (int batch : batches) {
      const int ctx = 64;
      inference::StepInput in;
      int page = 0;
      for (int b = 0; b < batch; ++b) {
        std::vector<int32_t> table;
        for (int p = 0; p < ctx / 16 + 1; ++p) table.push_back(page++);
        in.seq_pages.push_back(table);
        in.tokens.push_back(b % 256);
        in.positions.push_back(ctx);
        in.row_seq.push_back(b);
        in.logit_rows.push_back(b);
      }
      inference::StepOutput out;
      for (int i = 0; i < 3; ++i) (void)(*backend)->Forward(in, &out);
      cudaDeviceSynchronize();
      auto t0 = std::chrono::steady_clock::now();
      constexpr int kIters = 20;
      for (int i = 0; i < kIters; ++i) (void)(*backend)->Forward(in, &out);
      cudaDeviceSynchronize();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kIters;
      std::printf("engine.gpu_forward_only_ms_b%d=%.3f\n", batch, ms);
      // The same with new tokens every step, so the routing (and the expert groups' sizes)
      // changes from step to step as it does in decoding.
      cudaDeviceSynchronize();
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kIters; ++i) {
        for (int b = 0; b < batch; ++b) in.tokens[b] = (b * 7 + (i + 1) * 13) % 256;
        (void)(*backend)->Forward(in, &out);
      }
      cudaDeviceSynchronize();
      const double varied = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kIters;
      std::printf("engine.gpu_forward_varied_ms_b%d=%.3f\n", batch, varied);
    }
  }
  if (!forward_only) std::printf("engine.gpu_roofline_frac_vs_datasheet_4800gbps=%.3f\n", frac256 * bw / 4.8e12);
  return 0;
}
#endif

}  // namespace flotilla::bench
