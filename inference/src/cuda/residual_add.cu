#include <cuda_bf16.h>

#include <algorithm>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__global__ void ResidualAddKernel(float* x, const __nv_bfloat16* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += __bfloat162float(y[i]);
  }
}

}  // namespace

cudaError_t LaunchResidualAdd(float* x, const uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  ResidualAddKernel<<<blocks, 256, 0, stream>>>(x, reinterpret_cast<const __nv_bfloat16*>(y), n);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
