// Paged attention for head_dim 128, one block per (row, KV head): the block reads each key and
// value row of its KV head once for all the query heads that share it (grouped-query
// attention), with an online softmax so no per-key score buffer is needed. Keys are spread over
// the block's warps in tiles of 32 (a lane per key for the scores, 16-byte loads of the key row);
// the values of a tile are then summed by the whole warp (a lane per 4 dims, 8-byte loads), and
// the warps' partial results are merged at the end.
#include <cuda_bf16.h>

#include <cstdlib>
#include <string>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kWarps = 4;

template <int G>
__global__ void __launch_bounds__(kWarps * 32)
    GqaAttentionKernel(const __nv_bfloat16* q, const int32_t* positions, const int32_t* row_seq,
                       KvGeometry kv, int layer, int n_heads, int window, __nv_bfloat16* o) {
  __shared__ __align__(16) float qs[G][kHeadDim];
  __shared__ float warp_m[kWarps][G], warp_l[kWarps][G];
  __shared__ __align__(16) float warp_acc[kWarps][G][kHeadDim];
  const int r = blockIdx.x, kvh = blockIdx.y;
  const int h0 = kvh * G;
  const int pos = positions[r], seq = row_seq[r];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int n = pos - lo + 1;
  const int P = kv.page_tokens;
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  const __nv_bfloat16* qr = q + (static_cast<int64_t>(r) * n_heads + h0) * kHeadDim;
  for (int i = threadIdx.x; i < G * kHeadDim; i += kWarps * 32) {
    qs[i / kHeadDim][i % kHeadDim] = __bfloat162float(qr[i]) * scale;
  }
  __syncthreads();
  const int32_t* table = kv.table + static_cast<int64_t>(seq) * kv.table_stride;
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages) +
                              static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * kHeadDim;
  const int64_t v_rel = static_cast<int64_t>(P) * kv.kv_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float m[G], l[G], acc[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[g][c] = 0;
  }
  for (int tile = warp * 32; tile < n; tile += kWarps * 32) {
    const int j = tile + lane;
    const bool valid = j < n;
    int64_t row = 0;  // element offset of this lane's key row
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0;
    if (valid) {
      const int p = lo + j;
      row = table[p / P] * page_elems + static_cast<int64_t>(p % P) * kv.kv_dim;
      const uint4* k = reinterpret_cast<const uint4*>(base + row);
#pragma unroll 4
      for (int c = 0; c < kHeadDim / 8; ++c) {
        const uint4 u = k[c];
        const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
        float f[8];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float2 x = __bfloat1622float2(b[t]);
          f[2 * t] = x.x;
          f[2 * t + 1] = x.y;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float4 qa = *reinterpret_cast<const float4*>(&qs[g][c * 8]);
          const float4 qb = *reinterpret_cast<const float4*>(&qs[g][c * 8 + 4]);
          s[g] += qa.x * f[0] + qa.y * f[1] + qa.z * f[2] + qa.w * f[3] + qb.x * f[4] + qb.y * f[5] +
                  qb.z * f[6] + qb.w * f[7];
        }
      }
    }
    float w[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float tile_max = valid ? s[g] : -INFINITY;
      for (int off = 16; off > 0; off >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float new_m = fmaxf(m[g], tile_max);  // finite: lane 0 of a tile is always valid
      const float corr = __expf(m[g] - new_m);
      w[g] = valid ? __expf(s[g] - new_m) : 0.0f;
      l[g] = l[g] * corr + w[g];
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[g][c] *= corr;
      m[g] = new_m;
    }
    const int count = min(32, n - tile);
#pragma unroll 4
    for (int jj = 0; jj < count; ++jj) {
      const int64_t vrow = __shfl_sync(0xffffffffu, row, jj);
      const uint2 u = *reinterpret_cast<const uint2*>(base + vrow + v_rel + lane * 4);
      const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
      const float2 f0 = __bfloat1622float2(b[0]), f1 = __bfloat1622float2(b[1]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float wj = __shfl_sync(0xffffffffu, w[g], jj);
        acc[g][0] += wj * f0.x;
        acc[g][1] += wj * f0.y;
        acc[g][2] += wj * f1.x;
        acc[g][3] += wj * f1.y;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float sum = l[g];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
      warp_m[warp][g] = m[g];
      warp_l[warp][g] = sum;
    }
    *reinterpret_cast<float4*>(&warp_acc[warp][g][lane * 4]) = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * kHeadDim; i += kWarps * 32) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float mx = -INFINITY;
#pragma unroll
    for (int w2 = 0; w2 < kWarps; ++w2) mx = fmaxf(mx, warp_m[w2][g]);
    float total = 0, value = 0;
#pragma unroll
    for (int w2 = 0; w2 < kWarps; ++w2) {
      if (warp_m[w2][g] == -INFINITY) continue;  // a warp that saw no key
      const float f = __expf(warp_m[w2][g] - mx);
      total += warp_l[w2][g] * f;
      value += warp_acc[w2][g][d] * f;
    }
    o[(static_cast<int64_t>(r) * n_heads + h0 + g) * kHeadDim + d] = __float2bfloat16(value / total);
  }
}

template <int G>
cudaError_t Launch(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                   int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                   cudaStream_t stream) {
  dim3 grid(rows, n_kv_heads);
  GqaAttentionKernel<G><<<grid, kWarps * 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions,
                                                          row_seq, kv, layer, n_heads, window,
                                                          reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace

bool GqaAttentionSupports(int n_heads, int n_kv_heads, int head_dim, int kv_dim) {
  if (head_dim != kHeadDim || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || kv_dim % 8 != 0) return false;
  const int g = n_heads / n_kv_heads;
  return g == 1 || g == 2 || g == 4 || g == 8;
}

cudaError_t LaunchGqaAttention(const uint16_t* q, const int32_t* positions, const int32_t* row_seq,
                               KvGeometry kv, int layer, int rows, int n_heads, int n_kv_heads,
                               int head_dim, int window, uint16_t* o, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!GqaAttentionSupports(n_heads, n_kv_heads, head_dim, kv.kv_dim)) return cudaErrorInvalidValue;
  // The tensor-core kernel unless FLOTILLA_CUDA_GQA=simt asks for this file's kernel.
  static const bool simt = [] {
    const char* v = std::getenv("FLOTILLA_CUDA_GQA");
    return v != nullptr && std::string(v) == "simt";
  }();
  if (!simt) return LaunchGqaAttentionMma(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, window, o, stream);
  switch (n_heads / n_kv_heads) {
    case 1: return Launch<1>(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, window, o, stream);
    case 2: return Launch<2>(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, window, o, stream);
    case 4: return Launch<4>(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, window, o, stream);
    default: return Launch<8>(q, positions, row_seq, kv, layer, rows, n_heads, n_kv_heads, window, o, stream);
  }
}

}  // namespace flotilla::inference::cuda
