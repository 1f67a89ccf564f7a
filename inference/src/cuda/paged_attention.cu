#include <cuda_bf16.h>

#include <cstdlib>
#include <string>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 128;


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

// One block per (row, query head). The row's page ids are staged in shared memory first, so
// each key costs one global load; scores go to shared memory, then each warp accumulates V over
// a quarter of the keys (lanes over head dims) and the warps' partial sums are added. kChunks:
// the 32-dim slices of a head a lane accumulates (4: heads up to 128; 8: up to 256, as
// DeepSeek-V3's 192-wide latent-attention keys).
template <int kChunks>
__global__ void PagedAttentionKernel(const __nv_bfloat16* q, const int32_t* positions,
                                     const int32_t* row_seq, KvGeometry kv, int layer, int n_heads,
                                     int n_kv_heads, int head_dim, int window, int max_context,
                                     bool vectorized, __nv_bfloat16* o) {
  extern __shared__ float smem[];
  __shared__ float scratch[kThreads / 32 + 1];
  const int r = blockIdx.x, h = blockIdx.y;
  const int kvh = h / (n_heads / n_kv_heads);
  const int pos = positions[r], seq = row_seq[r];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int n = pos - lo + 1;
  const int P = kv.page_tokens;
  float* qs = smem;
  float* sc = qs + head_dim;
  float* part = sc + max_context;
  int32_t* pg = reinterpret_cast<int32_t*>(part + (kThreads / 32) * head_dim);
  const __nv_bfloat16* qr = q + (static_cast<int64_t>(r) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) qs[d] = __bfloat162float(qr[d]);
  for (int i = threadIdx.x; i <= pos / P; i += kThreads) pg[i] = kv.table[seq * kv.table_stride + i];
  __syncthreads();
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages);
  const int64_t k_off = static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * head_dim;
  const int64_t v_off = k_off + static_cast<int64_t>(P) * kv.kv_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  if (vectorized && head_dim % 8 == 0) {
    // Thread per key: 16-byte loads of the whole key row, many keys in flight.
    for (int j = threadIdx.x; j < n; j += kThreads) {
      const int p = lo + j;
      const uint4* k = reinterpret_cast<const uint4*>(base + pg[p / P] * page_elems + k_off +
                                                      static_cast<int64_t>(p % P) * kv.kv_dim);
      float s = 0;
      for (int c = 0; c < head_dim / 8; ++c) {
        const uint4 u = k[c];
        const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float2 f = __bfloat1622float2(b[t]);
          s += qs[c * 8 + 2 * t] * f.x + qs[c * 8 + 2 * t + 1] * f.y;
        }
      }
      sc[j] = s * scale;
    }
  } else {
    for (int j = warp; j < n; j += kThreads / 32) {
      const int p = lo + j;
      const __nv_bfloat16* k = base + pg[p / P] * page_elems + k_off + static_cast<int64_t>(p % P) * kv.kv_dim;
      float s = 0;
      for (int d = lane; d < head_dim; d += 32) s += qs[d] * __bfloat162float(k[d]);
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) sc[j] = s * scale;
    }
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
  float acc[kChunks] = {};
  if (vectorized && head_dim == 128) {
    // Each lane owns 4 consecutive dims (one 8-byte load per key); 4 keys in flight per warp.
#pragma unroll 4
    for (int j = warp; j < n; j += kThreads / 32) {
      const int p = lo + j;
      const uint2 u = *reinterpret_cast<const uint2*>(base + pg[p / P] * page_elems + v_off +
                                                      static_cast<int64_t>(p % P) * kv.kv_dim + lane * 4);
      const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
      const float w = sc[j];
      const float2 f0 = __bfloat1622float2(b[0]), f1 = __bfloat1622float2(b[1]);
      acc[0] += w * f0.x;
      acc[1] += w * f0.y;
      acc[2] += w * f1.x;
      acc[3] += w * f1.y;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) part[warp * head_dim + lane * 4 + c] = acc[c];
  } else {
    for (int j = warp; j < n; j += kThreads / 32) {
      const int p = lo + j;
      const __nv_bfloat16* v = base + pg[p / P] * page_elems + v_off + static_cast<int64_t>(p % P) * kv.kv_dim;
      const float w = sc[j];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d = lane + 32 * c;
        if (d < head_dim) acc[c] += w * __bfloat162float(v[d]);
      }
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < head_dim) part[warp * head_dim + d] = acc[c];
    }
  }
  __syncthreads();
  const float inv = 1.0f / sum;
  __nv_bfloat16* orow = o + (static_cast<int64_t>(r) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    float t = 0;
    for (int w = 0; w < kThreads / 32; ++w) t += part[w * head_dim + d];
    orow[d] = __float2bfloat16(t * inv);
  }
}

}  // namespace

cudaError_t LaunchPagedAttention(const uint16_t* q, const int32_t* positions, const int32_t* row_seq,
                                 KvGeometry kv, int layer, int rows, int n_heads, int n_kv_heads,
                                 int head_dim, int window, int max_context, uint16_t* o,
                                 cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (head_dim > 256) return cudaErrorInvalidValue;
  // FLOTILLA_CUDA_ATTN=generic selects the scalar loads (a cross-check of the vector paths);
  // =gqa forces the grouped kernel wherever it applies, =head the per-head kernel.
  static const std::string mode = [] {
    const char* v = std::getenv("FLOTILLA_CUDA_ATTN");
    return std::string(v == nullptr ? "" : v);
  }();
  const bool vectorized = mode != "generic";
  // The grouped kernel has a block per (row, KV head): below a few blocks per multiprocessor
  // (a handful of rows) the per-head kernel spreads a long context over more blocks.
  constexpr int kGroupedMinBlocks = 256;
  if (vectorized && mode != "head" && GqaAttentionSupports(n_heads, n_kv_heads, head_dim, kv.kv_dim) &&
      (mode == "gqa" || rows * n_kv_heads >= kGroupedMinBlocks)) {
    return LaunchGqaAttention(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, head_dim, window, o,
                              stream);
  }
  const size_t smem = static_cast<size_t>(head_dim + max_context + (kThreads / 32) * head_dim) * sizeof(float) +
                      static_cast<size_t>(max_context / kv.page_tokens + 1) * sizeof(int32_t);
  // Heads over 128 (DeepSeek-V3's 192-wide keys) take the wide instantiation.
  const auto kernel = head_dim > 128 ? PagedAttentionKernel<8> : PagedAttentionKernel<4>;
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  dim3 grid(rows, n_heads);
  kernel<<<grid, kThreads, smem, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions, row_seq, kv, layer,
                                           n_heads, n_kv_heads, head_dim, window, max_context, vectorized,
                                           reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
