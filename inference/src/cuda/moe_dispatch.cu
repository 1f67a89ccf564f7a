#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__global__ void GatherRowsKernel(const uint4* x, const int32_t* src, int vec_per_row, uint4* out) {
  const int i = blockIdx.x;
  const uint4* s = x + static_cast<int64_t>(src[i]) * vec_per_row;
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) out[static_cast<int64_t>(i) * vec_per_row + v] = s[v];
}

__global__ void GatherRowsScalarKernel(const __nv_bfloat16* x, const int32_t* src, int dim, __nv_bfloat16* out) {
  const int i = blockIdx.x;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[static_cast<int64_t>(i) * dim + d] = x[static_cast<int64_t>(src[i]) * dim + d];
}

__global__ void SiluMulKernel(const __nv_bfloat16* gu, int hidden, __nv_bfloat16* h) {
  const int i = blockIdx.x;
  const __nv_bfloat16* g = gu + static_cast<int64_t>(i) * 2 * hidden;
  for (int f = threadIdx.x; f < hidden; f += blockDim.x) {
    const float a = __bfloat162float(g[f]);
    h[static_cast<int64_t>(i) * hidden + f] = __float2bfloat16(a / (1.0f + __expf(-a)) * __bfloat162float(g[hidden + f]));
  }
}

__global__ void CombineKernel(const __nv_bfloat16* y, const int32_t* inv, const float* weights, int top_k,
                              int dim, float* x) {
  const int r = blockIdx.x;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float acc = 0;
    for (int k = 0; k < top_k; ++k) {
      acc += weights[r * top_k + k] * __bfloat162float(y[static_cast<int64_t>(inv[r * top_k + k]) * dim + d]);
    }
    x[static_cast<int64_t>(r) * dim + d] += acc;
  }
}

}  // namespace

cudaError_t LaunchGatherRows(const uint16_t* x, const int32_t* src, int n, int dim, uint16_t* out,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dim % 8 == 0) {
    GatherRowsKernel<<<n, 128, 0, stream>>>(reinterpret_cast<const uint4*>(x), src, dim / 8,
                                            reinterpret_cast<uint4*>(out));
  } else {
    GatherRowsScalarKernel<<<n, 128, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x), src, dim,
                                                  reinterpret_cast<__nv_bfloat16*>(out));
  }
  return cudaGetLastError();
}

cudaError_t LaunchSiluMul(const uint16_t* gu, int n, int hidden, uint16_t* h, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SiluMulKernel<<<n, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(gu), hidden,
                                       reinterpret_cast<__nv_bfloat16*>(h));
  return cudaGetLastError();
}

cudaError_t LaunchCombine(const uint16_t* y, const int32_t* inv, const float* weights, int rows,
                          int top_k, int dim, float* x, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CombineKernel<<<rows, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(y), inv, weights, top_k, dim, x);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
