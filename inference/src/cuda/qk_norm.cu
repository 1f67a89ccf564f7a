// The q/k RMSNorm of the Qwen3 families: each query and key head of the fused qkv rows
// normalised over head_dim and scaled by its norm weight, in place, before RoPE.
#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 256;

// One warp per (row, head) over the n_heads query heads then the n_kv_heads key heads.
__global__ void QkNormKernel(__nv_bfloat16* qkv, int rows, int n_heads, int n_kv_heads, int head_dim,
                             const float* q_w, const float* k_w, float eps) {
  const int heads = n_heads + n_kv_heads;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= static_cast<int64_t>(rows) * heads) return;  // uniform across the warp
  const int r = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
  __nv_bfloat16* x = qkv + static_cast<int64_t>(r) * (n_heads + 2 * n_kv_heads) * head_dim +
                     static_cast<int64_t>(h) * head_dim;
  const float* w = h < n_heads ? q_w : k_w;
  float ss = 0;
  for (int i = lane; i < head_dim; i += 32) {
    const float v = __bfloat162float(x[i]);
    ss += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float scale = rsqrtf(ss / head_dim + eps);
  for (int i = lane; i < head_dim; i += 32) x[i] = __float2bfloat16(__bfloat162float(x[i]) * scale * w[i]);
}

}  // namespace

cudaError_t LaunchQkNorm(uint16_t* qkv, int rows, int n_heads, int n_kv_heads, int head_dim, const float* q_w,
                         const float* k_w, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t threads = static_cast<int64_t>(rows) * (n_heads + n_kv_heads) * 32;
  const int blocks = static_cast<int>((threads + kThreads - 1) / kThreads);
  QkNormKernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(qkv), rows, n_heads, n_kv_heads,
                                                head_dim, q_w, k_w, eps);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
