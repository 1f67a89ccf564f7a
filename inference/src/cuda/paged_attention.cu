#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ const __nv_bfloat16* KvRow(const KvGeometry& kv, int seq, int pos, int layer, int which) {
  const int page = kv.table[seq * kv.table_stride + pos / kv.page_tokens];
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * kv.page_tokens * kv.kv_dim;
  const int64_t off = ((static_cast<int64_t>(layer) * 2 + which) * kv.page_tokens + pos % kv.page_tokens) * kv.kv_dim;
  return reinterpret_cast<const __nv_bfloat16*>(kv.pages) + page * page_elems + off;
}

template <bool kMax>
__device__ float BlockReduce(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = scratch[0];
    for (int w = 1; w < kThreads / 32; ++w) t = kMax ? fmaxf(t, scratch[w]) : t + scratch[w];
    scratch[kThreads / 32] = t;
  }
  __syncthreads();
  float out = scratch[kThreads / 32];
  __syncthreads();
  return out;
}

// One block per (row, query head): scores into shared memory, softmax, then V.
__global__ void PagedAttentionKernel(const __nv_bfloat16* q, const int32_t* positions,
                                     const int32_t* row_seq, KvGeometry kv, int layer, int n_heads,
                                     int n_kv_heads, int head_dim, int window, __nv_bfloat16* o) {
  extern __shared__ float smem[];
  __shared__ float scratch[kThreads / 32 + 1];
  const int r = blockIdx.x, h = blockIdx.y;
  const int kvh = h / (n_heads / n_kv_heads);
  const int pos = positions[r], seq = row_seq[r];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int n = pos - lo + 1;
  float* qs = smem;
  float* sc = smem + head_dim;
  const __nv_bfloat16* qr = q + (static_cast<int64_t>(r) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) qs[d] = __bfloat162float(qr[d]);
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int j = warp; j < n; j += kThreads / 32) {
    const __nv_bfloat16* k = KvRow(kv, seq, lo + j, layer, 0) + kvh * head_dim;
    float s = 0;
    for (int d = lane; d < head_dim; d += 32) s += qs[d] * __bfloat162float(k[d]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += kThreads) m = fmaxf(m, sc[j]);
  m = BlockReduce<true>(m, scratch);
  float sum = 0;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    const float e = __expf(sc[j] - m);
    sc[j] = e;
    sum += e;
  }
  sum = BlockReduce<false>(sum, scratch);
  const float inv = 1.0f / sum;
  __nv_bfloat16* orow = o + (static_cast<int64_t>(r) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    float acc = 0;
    for (int j = 0; j < n; ++j) acc += sc[j] * __bfloat162float(KvRow(kv, seq, lo + j, layer, 1)[kvh * head_dim + d]);
    orow[d] = __float2bfloat16(acc * inv);
  }
}

}  // namespace

cudaError_t LaunchPagedAttention(const uint16_t* q, const int32_t* positions, const int32_t* row_seq,
                                 KvGeometry kv, int layer, int rows, int n_heads, int n_kv_heads,
                                 int head_dim, int window, int max_context, uint16_t* o,
                                 cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(head_dim + max_context) * sizeof(float);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(PagedAttentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  dim3 grid(rows, n_heads);
  PagedAttentionKernel<<<grid, kThreads, smem, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(q), positions, row_seq, kv, layer, n_heads, n_kv_heads,
      head_dim, window, reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
