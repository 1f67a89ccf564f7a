#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

// The sum of every thread's `v` over the block (blockDim.x a multiple of 32, at most 1024),
// returned to all threads.
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) w += __shfl_xor_sync(0xffffffffu, w, off);
    if (threadIdx.x == 0) partial[0] = w;
  }
  __syncthreads();
  return partial[0];
}

__global__ void RmsNormKernel(const float* x, const float* w, const int32_t* src, __nv_bfloat16* y,
                              int dim, float eps) {
  const int i = blockIdx.x;
  const int r = src == nullptr ? i : src[i];
  const float* xr = x + static_cast<int64_t>(r) * dim;
  float ss = 0;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) ss += xr[d] * xr[d];
  const float total = BlockSum(ss);
  const float scale = rsqrtf(total / dim + eps);
  __nv_bfloat16* yr = y + static_cast<int64_t>(i) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) yr[d] = __float2bfloat16(xr[d] * scale * w[d]);
}

// The same with 16-byte loads of x and w and 8-byte stores of y (dim % 4 == 0).
__global__ void RmsNormVecKernel(const float4* x, const float4* w, const int32_t* src, uint2* y, int vecs,
                                 float eps) {
  const int i = blockIdx.x;
  const int r = src == nullptr ? i : src[i];
  const float4* xr = x + static_cast<int64_t>(r) * vecs;
  float ss = 0;
  for (int d = threadIdx.x; d < vecs; d += blockDim.x) {
    const float4 v = xr[d];
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  const float total = BlockSum(ss);
  const float scale = rsqrtf(total / (4 * vecs) + eps);
  uint2* yr = y + static_cast<int64_t>(i) * vecs;
  for (int d = threadIdx.x; d < vecs; d += blockDim.x) {
    const float4 v = xr[d], g = w[d];
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x * scale * g.x, v.y * scale * g.y);
    const __nv_bfloat162 b = __floats2bfloat162_rn(v.z * scale * g.z, v.w * scale * g.w);
    uint2 out;
    out.x = *reinterpret_cast<const uint32_t*>(&a);
    out.y = *reinterpret_cast<const uint32_t*>(&b);
    yr[d] = out;
  }
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const float* w, const int32_t* src, uint16_t* y, int rows,
                          int dim, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (dim % 4 == 0) {
    const int threads = dim >= 1024 ? 256 : 64;
    RmsNormVecKernel<<<rows, threads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(w),
                                                   src, reinterpret_cast<uint2*>(y), dim / 4, eps);
  } else {
    RmsNormKernel<<<rows, 256, 0, stream>>>(x, w, src, reinterpret_cast<__nv_bfloat16*>(y), dim, eps);
  }
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
