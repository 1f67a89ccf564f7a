// Grouped-query paged attention for head_dim 128 on the tensor cores: one warp per (row, KV
// head). The warp walks the row's keys in tiles of 16, copying each tile's K and V rows into
// shared memory asynchronously (every copy a whole 16-byte piece of a row: coalesced), then
//   S = Q K^T  (mma m16n8k16: the G query heads as rows, padded to 16; keys as columns)
//   online softmax per head in f32 registers
//   O += P V   (P straight from S's accumulator layout as the A operand; V through ldmatrix.trans)
// and writes O / l. bf16 products accumulate in f32, as in the SIMT kernel.
// One stage of 8.5 KB and at most 128 registers a warp, so 16 warps fit on a multiprocessor and
// a 256-row batch's 2048 (row, KV head) pairs run in one wave, the warps hiding each other's
// copies (measured on the H200: 25 us a layer at batch 256, against 29 us for a two-stage
// pipeline that fits 13 warps).
#include <cuda_bf16.h>

#include <cstdint>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kKeys = 16;              // keys per tile
constexpr int kRow = kHeadDim + 8;     // padded shared row (272 bytes): conflict-free fragment reads

__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: zero-fill (a key past the row's end)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void CopyCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CopyWait() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  // A rows 8..15 (query heads past 8) are zero.
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__global__ void __launch_bounds__(32, 16)
    GqaAttentionMmaKernel(const __nv_bfloat16* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                          int layer, int n_heads, int group, int window, __nv_bfloat16* o) {
  __shared__ __align__(16) __nv_bfloat16 ks[kKeys][kRow];
  __shared__ __align__(16) __nv_bfloat16 vs[kKeys][kRow];
  const int r = blockIdx.x, kvh = blockIdx.y;
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  const int h0 = kvh * group;
  const int pos = positions[r], seq = row_seq[r];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int n = pos - lo + 1;
  const int P = kv.page_tokens;
  const int32_t* table = kv.table + static_cast<int64_t>(seq) * kv.table_stride;
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages) +
                              static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * kHeadDim;
  const int64_t v_rel = static_cast<int64_t>(P) * kv.kv_dim;

  // Q as the A operand: row g (query head h0 + g, zero past the group), 8 k-steps of 16 dims.
  uint32_t qa[kHeadDim / 16][2];
  {
    const uint32_t* qr = reinterpret_cast<const uint32_t*>(q + (static_cast<int64_t>(r) * n_heads + h0 + g) * kHeadDim);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      qa[kk][0] = g < group ? qr[kk * 8 + t] : 0u;
      qa[kk][1] = g < group ? qr[kk * 8 + 4 + t] : 0u;
    }
  }

  // Lane l copies pieces l % 16 of rows l / 16, l / 16 + 2, ... of a tile.
  auto issue = [&](int tile) {
#pragma unroll
    for (int i = 0; i < kKeys / 2; ++i) {
      const int row = (lane >> 4) + 2 * i, piece = lane & 15;
      const int j = tile * kKeys + row;
      const bool valid = j < n;
      int64_t off = 0;
      if (valid) {
        const int p = lo + j;
        off = table[p / P] * page_elems + static_cast<int64_t>(p % P) * kv.kv_dim;
      }
      CopyAsync16(&ks[row][piece * 8], base + off + piece * 8, valid);
      CopyAsync16(&vs[row][piece * 8], base + off + v_rel + piece * 8, valid);
    }
    CopyCommit();
  };

  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  float m = -INFINITY, l = 0;  // head g's running max and (this lane's part of the) sum
  float acc[kHeadDim / 8][2];  // O[head g][dims nb * 8 + 2t, +1]
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb) acc[nb][0] = acc[nb][1] = 0;

  const int tiles = (n + kKeys - 1) / kKeys;
  for (int tile = 0; tile < tiles; ++tile) {
    issue(tile);
    CopyWait();
    __syncwarp();
    // S for keys tile * 16 + [0, 8) and [8, 16): s[kb][0..1] = head g, keys kb * 8 + 2t, +1.
    float s[2][4];
#pragma unroll
    for (int kb = 0; kb < 2; ++kb) {
      s[kb][0] = s[kb][1] = s[kb][2] = s[kb][3] = 0;
      const __nv_bfloat16* krow = ks[kb * 8 + g];
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 2 * t);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8 + 2 * t);
        Mma(s[kb], qa[kk][0], qa[kk][1], b0, b1);
      }
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = tile * kKeys + kb * 8 + 2 * t + e;
        s[kb][e] = j < n ? s[kb][e] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[kb][e]);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_m = fmaxf(m, tile_max);  // finite: a tile's first key is always valid
    const float corr = __expf(m - new_m);
    m = new_m;
    float p[2][2];
#pragma unroll
    for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
      for (int e = 0; e < 2; ++e) p[kb][e] = __expf(s[kb][e] - new_m);
    }
    l = l * corr + p[0][0] + p[0][1] + p[1][0] + p[1][1];
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) {
      acc[nb][0] *= corr;
      acc[nb][1] *= corr;
    }
    // P as the A operand: row g, keys 2t, 2t+1 (a0) and 8 + 2t, 8 + 2t + 1 (a2).
    const uint32_t pa0 = PackBf16(p[0][0], p[0][1]), pa2 = PackBf16(p[1][0], p[1][1]);
    // V as the B operand, two 8-dim blocks per ldmatrix: lane l gives the address of row
    // (l & 7) + 8 ((l >> 3) & 1) (a key), dims (2 pair + (l >> 4)) * 8.
    const int vkey = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int pair = 0; pair < kHeadDim / 16; ++pair) {
      uint32_t b[4];
      LdMatrixX4Trans(b, &vs[vkey][(2 * pair + (lane >> 4)) * 8]);
      float d0[4] = {acc[2 * pair][0], acc[2 * pair][1], 0, 0};
      float d1[4] = {acc[2 * pair + 1][0], acc[2 * pair + 1][1], 0, 0};
      Mma(d0, pa0, pa2, b[0], b[1]);
      Mma(d1, pa0, pa2, b[2], b[3]);
      acc[2 * pair][0] = d0[0];
      acc[2 * pair][1] = d0[1];
      acc[2 * pair + 1][0] = d1[0];
      acc[2 * pair + 1][1] = d1[1];
    }
    __syncwarp();  // the tile is read before the next tile's copies overwrite it
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (g < group) {
    const float inv = 1.0f / l;
    uint32_t* orow = reinterpret_cast<uint32_t*>(o + (static_cast<int64_t>(r) * n_heads + h0 + g) * kHeadDim);
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) orow[nb * 4 + t] = PackBf16(acc[nb][0] * inv, acc[nb][1] * inv);
  }
}

}  // namespace

cudaError_t LaunchGqaAttentionMma(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                                  int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                                  cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int group = n_heads / n_kv_heads;
  if (group > 8 || n_heads % n_kv_heads != 0 || kv.kv_dim % 8 != 0) return cudaErrorInvalidValue;
  dim3 grid(rows, n_kv_heads);
  GqaAttentionMmaKernel<<<grid, 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions, row_seq, kv,
                                                 layer, n_heads, group, window, reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
