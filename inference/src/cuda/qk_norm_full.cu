// OLMoE's q/k RMSNorm: unlike the Qwen3 families' per-head norm (qk_norm.cu), the whole query
// projection (n_heads * head_dim values) and the whole key projection (n_kv_heads * head_dim)
// of a row are each normalised as one vector and scaled by a norm weight of that length, in
// place on the fused qkv rows, before RoPE.
#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 256;

// One block per (row, q or k).
__global__ void QkNormFullKernel(__nv_bfloat16* qkv, int q_dim, int k_dim, int row_width, const float* q_w,
                                 const float* k_w, float eps) {
  __shared__ float partial[kThreads / 32];
  const int r = blockIdx.x >> 1, part = blockIdx.x & 1;
  const int dim = part == 0 ? q_dim : k_dim;
  const float* w = part == 0 ? q_w : k_w;
  __nv_bfloat16* x = qkv + static_cast<int64_t>(r) * row_width + (part == 0 ? 0 : q_dim);
  float ss = 0;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    const float v = __bfloat162float(x[i]);
    ss += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += partial[i];
  const float scale = rsqrtf(total / dim + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) x[i] = __float2bfloat16(__bfloat162float(x[i]) * scale * w[i]);
}

}  // namespace

cudaError_t LaunchQkNormFull(uint16_t* qkv, int rows, int q_dim, int k_dim, int row_width, const float* q_w,
                             const float* k_w, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  QkNormFullKernel<<<2 * rows, kThreads, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(qkv), q_dim, k_dim, row_width,
                                                      q_w, k_w, eps);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
