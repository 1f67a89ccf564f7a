// DeepSeek-V3's router (noaux_tc): s = sigmoid(logits); experts chosen by s + bias (the
// e_score_correction_bias, which moves the choice only): the n_group groups ranked by the sum
// of their two best choice scores, the best topk_group kept, the other groups' experts scored
// 0 (as transformers masks them), then the top_k experts (ties: lower id). Weights are s at the
// chosen experts, divided by their sum (+1e-20) when `renormalize` (norm_topk_prob), times
// `scaling` (routed_scaling_factor).
#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kMaxExperts = 256;

// Whether a ranks before b: larger first, ties to the lower index.
__device__ __forceinline__ bool Before(float va, int a, float vb, int b) { return va > vb || (va == vb && a < b); }

// One thread per row.
__global__ void RouterGroupedKernel(const float* logits, const float* bias, int rows, int E, int K, int n_group,
                                    int topk_group, bool renormalize, float scaling, int32_t* experts, float* weights) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* lr = logits + static_cast<int64_t>(r) * E;
  float choice[kMaxExperts];
  for (int e = 0; e < E; ++e) choice[e] = 1.0f / (1.0f + expf(-lr[e])) + bias[e];
  const int per = E / n_group;
  float group[kMaxExperts];
  for (int g = 0; g < n_group; ++g) {
    int b0 = -1, b1 = -1;
    for (int e = g * per; e < (g + 1) * per; ++e) {
      if (b0 < 0 || Before(choice[e], e, choice[b0], b0)) {
        b1 = b0;
        b0 = e;
      } else if (b1 < 0 || Before(choice[e], e, choice[b1], b1)) {
        b1 = e;
      }
    }
    group[g] = choice[b0] + choice[b1];
  }
  bool kept[kMaxExperts];
  for (int g = 0; g < n_group; ++g) kept[g] = false;
  for (int t = 0; t < topk_group; ++t) {
    int best = -1;
    for (int g = 0; g < n_group; ++g) {
      if (!kept[g] && (best < 0 || Before(group[g], g, group[best], best))) best = g;
    }
    kept[best] = true;
  }
  for (int e = 0; e < E; ++e) {
    if (!kept[e / per]) choice[e] = 0.0f;
  }
  bool taken[kMaxExperts];
  for (int e = 0; e < E; ++e) taken[e] = false;
  float total = 0;
  for (int k = 0; k < K; ++k) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      if (!taken[e] && (best < 0 || Before(choice[e], e, choice[best], best))) best = e;
    }
    taken[best] = true;
    experts[static_cast<int64_t>(r) * K + k] = best;
    const float w = 1.0f / (1.0f + expf(-lr[best]));
    weights[static_cast<int64_t>(r) * K + k] = w;
    total += w;
  }
  const float denom = renormalize ? total + 1e-20f : 1.0f;
  for (int k = 0; k < K; ++k) weights[static_cast<int64_t>(r) * K + k] = weights[static_cast<int64_t>(r) * K + k] / denom * scaling;
}

}  // namespace

cudaError_t LaunchRouterGrouped(const float* logits, const float* bias, int rows, int n_experts, int top_k,
                                int n_group, int topk_group, bool renormalize, float scaling, int32_t* experts,
                                float* weights, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (n_experts > kMaxExperts || n_group <= 0 || n_experts % n_group != 0 || n_experts / n_group < 2 ||
      topk_group > n_group || top_k > n_experts) {
    return cudaErrorInvalidValue;
  }
  constexpr int kThreads = 64;
  RouterGroupedKernel<<<(rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      logits, bias, rows, n_experts, top_k, n_group, topk_group, renormalize, scaling, experts, weights);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
