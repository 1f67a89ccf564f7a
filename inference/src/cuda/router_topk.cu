#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 16;

// One thread per row: the expert count is small, so a serial pass beats any reduction.
__global__ void RouterTopKKernel(const float* logits, int rows, int n_experts, int top_k,
                                 int32_t* experts, float* weights, bool renormalize) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* lg = logits + static_cast<int64_t>(r) * n_experts;
  float mx = -INFINITY;
  for (int e = 0; e < n_experts; ++e) mx = fmaxf(mx, lg[e]);
  float sum = 0;
  for (int e = 0; e < n_experts; ++e) sum += __expf(lg[e] - mx);
  int chosen[kMaxTopK];
  float prob[kMaxTopK];
  float total = 0;
  for (int k = 0; k < top_k; ++k) {
    int best = -1;
    float bv = -INFINITY;
    for (int e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int j = 0; j < k; ++j) taken |= chosen[j] == e;
      if (!taken && (best < 0 || lg[e] > bv)) {
        best = e;
        bv = lg[e];
      }
    }
    chosen[k] = best;
    prob[k] = __expf(bv - mx) / sum;
    total += prob[k];
  }
  for (int k = 0; k < top_k; ++k) {
    experts[static_cast<int64_t>(r) * top_k + k] = chosen[k];
    weights[static_cast<int64_t>(r) * top_k + k] = renormalize ? prob[k] / total : prob[k];
  }
}

}  // namespace

cudaError_t LaunchRouterTopK(const float* logits, int rows, int n_experts, int top_k,
                             int32_t* experts, float* weights, cudaStream_t stream, bool renormalize) {
  if (rows == 0) return cudaSuccess;
  if (n_experts > kMaxExperts || top_k > kMaxTopK) return cudaErrorInvalidValue;
  RouterTopKKernel<<<(rows + 127) / 128, 128, 0, stream>>>(logits, rows, n_experts, top_k, experts, weights, renormalize);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
