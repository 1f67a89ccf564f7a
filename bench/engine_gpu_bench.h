// GPU half of `flotilla bench engine`, and the decode driver both halves share.
#pragma once

#include <vector>

#include "flotilla/inference/engine.h"

namespace flotilla::bench {

struct DecodeRun {
  double seconds = 0;            // from the step where every sequence had its first token to the end
  double tokens_per_second = 0;  // decode tokens in that window / seconds
  std::vector<std::vector<inference::TokenRecord>> records;
};

// `batch` sequences started together (prompt_len tokens each), each decoding new_tokens.
DecodeRun RunDecode(inference::Engine* engine, const std::string& model, int batch, int prompt_len,
                    int new_tokens);

// Decode throughput at batch 1, 64, 256 of a large MoE config on the CUDA backend, against the
// measured HBM copy bandwidth. Returns 0 on success (also when there is no device: it says so).
// forward_only: just the backend's forward step at batch 256, the run a kernel profiler reads.
int RunGpuBench(bool forward_only = false);

// The decode step of a Qwen3-30B-A3B-shaped Hugging Face qwen3_moe (`layers` layers, random bf16
// weights) on the CUDA backend at batch 64 and 256, against the measured copy bandwidth
// (hf_gpu_bench.cc).
// prefill_only: only the 32k prefill, in chunks of 32,768 / 16,384 / 8,192 / 4,096 rows.
int RunHfGpuBench(int layers, bool prefill_only = false);

// Device-to-device copy bandwidth (bytes read + written per second), median of 10.
double MeasureCopyBandwidth();

}  // namespace flotilla::bench
