#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__global__ void EmbedKernel(const int32_t* tokens, const __nv_bfloat16* table, float* x, int dim) {
  const int r = blockIdx.x;
  const __nv_bfloat16* src = table + static_cast<int64_t>(tokens[r]) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) x[static_cast<int64_t>(r) * dim + i] = __bfloat162float(src[i]);
}

}  // namespace

cudaError_t LaunchEmbed(const int32_t* tokens, const uint16_t* table, float* x, int rows, int dim,
                        cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  EmbedKernel<<<rows, 256, 0, stream>>>(tokens, reinterpret_cast<const __nv_bfloat16*>(table), x, dim);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
