// `flotilla_engine_bench --gpu-hf`: the CUDA backend's decode step on a Hugging Face qwen3_moe
// of Qwen3-30B-A3B's layer shape (hidden 2048, 32 query / 4 KV heads of 128, 128 experts top-8
// of hidden 768, q/k RMSNorm, norm_topk_prob, Qwen3's 151,936-token vocabulary) with fewer
// layers, random bf16 weights made on the device. Per batch: the forward step's time with every
// row's logits copied to the host (what the engine's host sampler needs at this vocabulary),
// and without logits (the layers alone), against the bytes the step must read (every weight it
// touches, the experts counted from the step's own routing, plus the KV it attends over) and the
// measured device copy bandwidth.
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
int RunHfGpuBench(int) {
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

}  // namespace

int RunHfGpuBench(int layers) {
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
  auto backend = inference::CreateHfCudaBackend(c, nullptr, 16, 8ull << 30);
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
    for (bool logits : {true, false}) {
      in.logit_rows.clear();
      if (logits) {
        for (int b = 0; b < batch; ++b) in.logit_rows.push_back(b);
      }
      double touched = 0;
      const double ms = TimeSteps(**backend, in, kIters, c.vocab_size, &touched);
      if (ms < 0) return 1;
      const double bytes = layers * layer_fixed + touched * expert_bytes + (logits ? V * D * 2 : 0) +
                           static_cast<double>(batch) * (kContext + 1) * layers * kv_per_token_layer;
      const std::string tag = absl::StrCat(logits ? "" : "layers_only_", "b", batch);
      std::printf("engine.hf_gpu_step_ms_%s=%.3f\nengine.hf_gpu_decode_tps_%s=%.0f\n"
                  "engine.hf_gpu_experts_per_layer_%s=%.1f\nengine.hf_gpu_roofline_frac_%s=%.3f\n",
                  tag.c_str(), ms, tag.c_str(), batch / (ms * 1e-3), tag.c_str(), touched / layers, tag.c_str(),
                  bytes / (ms * 1e-3) / bw);
      std::fflush(stdout);
    }
  }
  return 0;
}
#endif

}  // namespace flotilla::bench
