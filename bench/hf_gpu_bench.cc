// `flotilla_engine_bench --gpu-hf`: the CUDA backend's decode step on a Hugging Face qwen3_moe
// of Qwen3-30B-A3B's layer shape (hidden 2048, 32 query / 4 KV heads of 128, 128 experts top-8
// of hidden 768, q/k RMSNorm, norm_topk_prob, Qwen3's 151,936-token vocabulary) with fewer
// layers, random bf16 weights made on the device. Per batch: the forward step's time with every
// row sampled on the device (temperature 1: only tokens and logprobs come back, what the engine
// does), with every row's logits copied to the host instead (the host sampler's path, kept for
// comparison), and without logits (the layers alone), against the bytes the step must read
// (every weight it touches, the experts counted from the step's own routing, plus the KV it
// attends over) and the measured device copy bandwidth. Then one sequence's 32,768-token
// prompt prefilled in chunks, its last row sampled on the device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "engine_gpu_bench.h"
#include "flotilla/inference/hf_config.h"

#ifdef FLOTILLA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace flotilla::bench {

#ifndef FLOTILLA_HAVE_CUDA
int RunHfGpuBench(int, bool) {
  std::printf("engine.hf_gpu=unavailable (built without CUDA)\n");
  return 0;
}
#else
namespace {

// Median milliseconds of one Forward over `iters` steps, the tokens changed every step so the
// routing (and the expert groups' sizes) moves as in decoding.
double TimeSteps(inference::ModelBackend& b, inference::StepInput& in, int iters, int vocab, double* routed_experts) {
  inference::StepOutput out;
  std::vector<double> ms;
  const int B = static_cast<int>(in.tokens.size());
  const int K = b.config().top_k, M = b.config().n_layers;
  double touched = 0;
  for (int i = 0; i < iters + 2; ++i) {
    for (int r = 0; r < B; ++r) in.tokens[r] = static_cast<int32_t>((r * 7919 + (i + 1) * 104729) % vocab);
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = b.Forward(in, &out); !s.ok()) {
      std::printf("engine.hf_gpu=error (%s)\n", std::string(s.message()).c_str());
      return -1;
    }
    cudaDeviceSynchronize();
    if (i < 2) continue;  // warm-up
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (int l = 0; l < M; ++l) {
      std::set<int32_t> experts;
      for (int r = 0; r < B; ++r) {
        for (int k = 0; k < K; ++k) experts.insert(out.experts[(static_cast<size_t>(r) * M + l) * K + k]);
      }
      touched += static_cast<double>(experts.size());
    }
  }
  *routed_experts = touched / iters;  // experts touched per step, summed over layers
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Milliseconds to prefill one sequence of `tokens` tokens in steps of `chunk` rows (pages from
// 0), the last row sampled on the device; -1 on error.
double TimePrefill(inference::ModelBackend& b, int tokens, int chunk) {
  const int vocab = b.config().vocab_size, page_tokens = static_cast<int>(b.page_tokens());
  std::vector<int32_t> table;
  for (int p = 0; p * page_tokens < tokens; ++p) table.push_back(p);
  cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int start = 0; start < tokens; start += chunk) {
    const int n = std::min(chunk, tokens - start);
    inference::StepInput in;
    in.seq_pages.push_back(table);
    for (int i = start; i < start + n; ++i) {
      in.tokens.push_back(static_cast<int32_t>((static_cast<int64_t>(i) * 2654435761LL + 17) % vocab));
      in.positions.push_back(i);
      in.row_seq.push_back(0);
    }
    if (start + n == tokens) {
      in.logit_rows.push_back(n - 1);
      in.sampling.push_back({1.0f, 0, 12345});
    }
    inference::StepOutput out;
    if (absl::Status s = b.Forward(in, &out); !s.ok()) {
      std::printf("engine.hf_gpu=error (prefill: %s)\n", std::string(s.message()).c_str());
      return -1;
    }
  }
  cudaDeviceSynchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int RunHfGpuBench(int layers, bool prefill_only) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("engine.hf_gpu=unavailable (no CUDA device)\n");
    return 0;
  }
  const double bw = MeasureCopyBandwidth();
  std::printf("engine.hf_gpu_copy_bandwidth_gbps=%.0f\n", bw / 1e9);
  const std::string json = absl::StrCat(
      R"({"model_type":"qwen3_moe","vocab_size":151936,"hidden_size":2048,"num_hidden_layers":)", layers,
      R"(,"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"intermediate_size":6144,)"
      R"("moe_intermediate_size":768,"num_experts":128,"num_experts_per_tok":8,"norm_topk_prob":true,)"
      R"("decoder_sparse_step":1,"mlp_only_layers":[],"rms_norm_eps":1e-6,"max_position_embeddings":40960,)"
      R"("rope_theta":1000000.0,"tie_word_embeddings":false,"attention_bias":false})");
  auto config = inference::HfConfig::FromJson(json, "bench config");
  if (!config.ok()) {
    std::printf("engine.hf_gpu=error (%s)\n", std::string(config.status().message()).c_str());
    return 1;
  }
  const inference::HfConfig& c = *config;
  // KV for 256 rows at position 512 (and the 32k prefill, which reuses those pages).
  const uint64_t kv_bytes = static_cast<uint64_t>(layers) * 2 * 4 * 128 * 2 * 16 * 9000;
  auto backend = inference::CreateHfCudaBackend(c, nullptr, 16, kv_bytes);
  if (!backend.ok() || !(*backend)->SetRandomWeights(1, 0.02f).ok()) {
    std::printf("engine.hf_gpu=error (%s)\n", backend.ok() ? "random weights" : std::string(backend.status().message()).c_str());
    return 1;
  }
  const double D = c.hidden_size, hd = c.head_dim, E = c.num_experts, I = c.moe_intermediate_size, V = c.vocab_size;
  const double attn_bytes = D * hd * (2.0 * c.num_heads + 2.0 * c.num_kv_heads) * 2 + 2 * hd * 4;
  const double layer_fixed = attn_bytes + E * D * 2 + 2 * D * 4;
  const double expert_bytes = 3.0 * D * I * 2;
  const double kv_per_token_layer = 2.0 * c.num_kv_heads * hd * 2;
  std::printf("engine.hf_gpu_layers=%d\n", layers);
  constexpr int kContext = 512;  // every row decodes at this position
  constexpr int kIters = 20;
  for (int batch : {64, 256}) {
    if (prefill_only) break;
    inference::StepInput in;
    int page = 0;
    for (int b = 0; b < batch; ++b) {
      std::vector<int32_t> table;
      for (int p = 0; p <= kContext / 16; ++p) table.push_back(page++);
      in.seq_pages.push_back(table);
      in.tokens.push_back(0);
      in.positions.push_back(kContext);
      in.row_seq.push_back(b);
    }
    // 0: sampled on the device, 1: logits to the host, 2: layers only.
    for (int mode : {0, 1, 2}) {
      const bool logits = mode < 2;
      in.logit_rows.clear();
      in.sampling.clear();
      if (logits) {
        for (int b = 0; b < batch; ++b) in.logit_rows.push_back(b);
      }
      if (mode == 0) {
        for (int b = 0; b < batch; ++b) in.sampling.push_back({1.0f, 0, 0x5eed0000ull + static_cast<uint64_t>(b)});
      }
      double touched = 0;
      const double ms = TimeSteps(**backend, in, kIters, c.vocab_size, &touched);
      if (ms < 0) return 1;
      const double bytes = layers * layer_fixed + touched * expert_bytes + (logits ? V * D * 2 : 0) +
                           static_cast<double>(batch) * (kContext + 1) * layers * kv_per_token_layer;
      const char* prefix[] = {"", "logits_to_host_", "layers_only_"};
      const std::string tag = absl::StrCat(prefix[mode], "b", batch);
      std::printf("engine.hf_gpu_step_ms_%s=%.3f\nengine.hf_gpu_decode_tps_%s=%.0f\n"
                  "engine.hf_gpu_experts_per_layer_%s=%.1f\nengine.hf_gpu_roofline_frac_%s=%.3f\n",
                  tag.c_str(), ms, tag.c_str(), batch / (ms * 1e-3), tag.c_str(), touched / layers, tag.c_str(),
                  bytes / (ms * 1e-3) / bw);
      std::fflush(stdout);
    }
  }
  // 32k-token prefill: one step, then chunks of 8,192 and 2,048 rows (prefill_only: 16,384,
  // 8,192 and 4,096); each chunking timed twice (the first run also grows the workspaces), the
  // faster printed.
  constexpr int kPrefill = 32768;
  const std::vector<int> chunks = prefill_only ? std::vector<int>{kPrefill, 16384, 8192, 4096}
                                               : std::vector<int>{kPrefill, 8192, 2048};
  for (int chunk : chunks) {
    double best = -1;
    for (int rep = 0; rep < 2; ++rep) {
      const double ms = TimePrefill(**backend, kPrefill, chunk);
      if (ms < 0) return 1;
      best = best < 0 ? ms : std::min(best, ms);
    }
    std::printf("engine.hf_gpu_prefill32k_ms_chunk%d=%.1f\nengine.hf_gpu_prefill32k_tps_chunk%d=%.0f\n", chunk, best,
                chunk, kPrefill / (best * 1e-3));
    std::fflush(stdout);
  }
  return 0;
}
#endif

}  // namespace flotilla::bench
