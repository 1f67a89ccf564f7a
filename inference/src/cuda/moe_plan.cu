#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

// One block. Thread e owns expert e: counts its (row, slot) entries, then (after a prefix sum)
// places them in row order. Deterministic, no atomics.
__global__ void MoePlanKernel(const int32_t* chosen, int n, int top_k, int n_experts,
                              int32_t* offsets, int32_t* src, int32_t* inv) {
  __shared__ int32_t start[257];
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
    int32_t c = 0;
    for (int i = 0; i < n; ++i) c += chosen[i] == e;
    start[e + 1] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = 0;
    for (int e = 0; e < n_experts; ++e) start[e + 1] += start[e];
    for (int e = 0; e <= n_experts; ++e) offsets[e] = start[e];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
    int32_t pos = start[e];
    for (int i = 0; i < n; ++i) {
      if (chosen[i] == e) {
        src[pos] = i / top_k;
        inv[i] = pos;
        ++pos;
      }
    }
  }
}

}  // namespace

cudaError_t LaunchMoePlan(const int32_t* chosen, int rows, int top_k, int n_experts,
                          int32_t* offsets, int32_t* src, int32_t* inv, cudaStream_t stream) {
  if (n_experts > 256) return cudaErrorInvalidValue;
  MoePlanKernel<<<1, 256, 0, stream>>>(chosen, rows * top_k, top_k, n_experts, offsets, src, inv);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
