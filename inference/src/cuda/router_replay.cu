// Routing replay: the experts given per row (replay, row r's top_k ids at replay + r * stride)
// instead of the router's choice, with the weights the router gives those experts, as the CPU
// backends compute them: softmax over all the logits, the replayed experts' probabilities,
// divided by their sum when `renormalize`; or (sigmoid, DeepSeek-V3) sigmoid of the logits
// (e_score_correction_bias plays no part), divided by their sum + 1e-20 when `renormalize`, times
// `scaling`. The replayed ids land in `experts` in the given order.
#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kMaxTopK = 16;

// One thread per row.
__global__ void RouterReplayKernel(const float* logits, const int32_t* replay, int stride, int rows, int E, int K,
                                   bool sigmoid, bool renormalize, float scaling, int32_t* experts, float* weights) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* lg = logits + static_cast<int64_t>(r) * E;
  const int32_t* chosen = replay + static_cast<int64_t>(r) * stride;
  float w[kMaxTopK];
  float total = 0;
  if (sigmoid) {
    for (int k = 0; k < K; ++k) {
      w[k] = 1.0f / (1.0f + expf(-lg[chosen[k]]));
      total += w[k];
    }
  } else {
    float mx = -INFINITY;
    for (int e = 0; e < E; ++e) mx = fmaxf(mx, lg[e]);
    float sum = 0;
    for (int e = 0; e < E; ++e) sum += expf(lg[e] - mx);
    for (int k = 0; k < K; ++k) {
      w[k] = expf(lg[chosen[k]] - mx) / sum;
      total += w[k];
    }
  }
  const float denom = !renormalize ? 1.0f : sigmoid ? total + 1e-20f : total;
  for (int k = 0; k < K; ++k) {
    experts[static_cast<int64_t>(r) * K + k] = chosen[k];
    weights[static_cast<int64_t>(r) * K + k] = w[k] / denom * scaling;
  }
}

}  // namespace

cudaError_t LaunchRouterReplay(const float* logits, const int32_t* replay, int stride, int rows, int n_experts,
                               int top_k, bool sigmoid, bool renormalize, float scaling, int32_t* experts,
                               float* weights, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (top_k > kMaxTopK || top_k > n_experts || stride < top_k) return cudaErrorInvalidValue;
  constexpr int kThreads = 128;
  RouterReplayKernel<<<(rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      logits, replay, stride, rows, n_experts, top_k, sigmoid, renormalize, scaling, experts, weights);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
