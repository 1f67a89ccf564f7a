// Grouped-query paged attention for prefill chunks (head_dim 128) on the tensor cores: the same
// function as LaunchGqaAttentionMma, but one block of 4 warps per KV head and run of
// consecutive rows of one sequence, so each K/V tile is read from the pages once for up to
// 4 * 16 / G rows instead of once per row. A warp's mma rows are 16 / G query rows times the G
// query heads of the KV head (all 16 rows of m16n8k16 in use); the 4 warps share each tile of
// 32 keys, copied asynchronously into shared memory one tile ahead of the products:
//   S = Q K^T, online softmax per (row, head) in f32 registers, O += P V (P from S's registers)
// Each row masks the keys outside [its window's start, its position]. A block's rows that
// belong to different sequences are taken as separate runs, one after another.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kWarps = 4;
constexpr int kTile = 32;           // keys per shared tile
constexpr int kRow = kHeadDim + 8;  // padded shared row (272 bytes): conflict-free fragment reads

__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: zero-fill (a key past the run's last position)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void CopyCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CopyWaitAllButOne() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

__global__ void __launch_bounds__(kWarps * 32)
    GqaPrefillMmaKernel(const __nv_bfloat16* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                        int layer, int rows, int n_heads, int group, int window, __nv_bfloat16* o) {
  __shared__ __align__(16) __nv_bfloat16 ks[2][kTile][kRow];
  __shared__ __align__(16) __nv_bfloat16 vs[2][kTile][kRow];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kvh = blockIdx.y, h0 = kvh * group;
  const int per_warp = 16 / group, per_block = kWarps * per_warp;
  const int block_lo = blockIdx.x * per_block, block_hi = min(block_lo + per_block, rows);
  const int P = kv.page_tokens;
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages) +
                              static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * kHeadDim;
  const int64_t v_rel = static_cast<int64_t>(P) * kv.kv_dim;
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  const int vkey = (lane & 7) + ((lane >> 3) & 1) * 8;

  for (int run_lo = block_lo; run_lo < block_hi;) {
    // The run: rows of run_lo's sequence; its keys span every row's window.
    const int seq = row_seq[run_lo];
    int run_hi = run_lo + 1;
    while (run_hi < block_hi && row_seq[run_hi] == seq) ++run_hi;
    int klo = INT32_MAX, khi = -1;
    for (int r = run_lo; r < run_hi; ++r) {
      const int pos = positions[r];
      klo = min(klo, window > 0 ? max(0, pos - window + 1) : 0);
      khi = max(khi, pos);
    }
    const int32_t* table = kv.table + static_cast<int64_t>(seq) * kv.table_stride;

    // This lane's two mma rows: m = g and g + 8, each a (row, head) of the warp.
    int row_of[2], pos_of[2], lo_of[2];
    uint32_t qa[kHeadDim / 16][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = g + 8 * half;
      const int r = run_lo + warp * per_warp + m / group;
      const bool valid = r < run_hi;
      row_of[half] = valid ? r : -1;
      pos_of[half] = valid ? positions[r] : -1;
      lo_of[half] = valid && window > 0 ? max(0, pos_of[half] - window + 1) : 0;
      const uint32_t* qr =
          reinterpret_cast<const uint32_t*>(q + (static_cast<int64_t>(valid ? r : 0) * n_heads + h0 + m % group) * kHeadDim);
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        qa[kk][half] = valid ? qr[kk * 8 + t] : 0u;
        qa[kk][2 + half] = valid ? qr[kk * 8 + 4 + t] : 0u;
      }
    }
    const bool warp_busy = run_lo + warp * per_warp < run_hi;

    // Thread i copies pieces i, i + 128, ... of a tile's 32 keys x 16 pieces, K and V.
    auto issue = [&](int tile) {
      const int buf = tile & 1;
#pragma unroll
      for (int i = 0; i < kTile * 16 / (kWarps * 32); ++i) {
        const int idx = threadIdx.x + i * kWarps * 32;
        const int key = idx >> 4, piece = idx & 15;
        const int p = klo + tile * kTile + key;
        const bool valid = p <= khi;
        int64_t off = 0;
        if (valid) off = table[p / P] * page_elems + static_cast<int64_t>(p % P) * kv.kv_dim;
        CopyAsync16(&ks[buf][key][piece * 8], base + off + piece * 8, valid);
        CopyAsync16(&vs[buf][key][piece * 8], base + off + v_rel + piece * 8, valid);
      }
      CopyCommit();
    };

    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0, 0};
    float acc[kHeadDim / 8][4];  // O[row g: 0, 1 | row g + 8: 2, 3][dims nb * 8 + 2t, +1]
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0;

    const int tiles = (khi - klo + kTile) / kTile;
    issue(0);
    for (int tile = 0; tile < tiles; ++tile) {
      if (tile + 1 < tiles) {
        issue(tile + 1);
      } else {
        CopyCommit();  // an empty group keeps "all but one" meaning "this tile"
      }
      CopyWaitAllButOne();
      __syncthreads();
      const int buf = tile & 1;
      if (warp_busy) {
#pragma unroll
        for (int sub = 0; sub < kTile / 16; ++sub) {
          float s[2][4];
#pragma unroll
          for (int kb = 0; kb < 2; ++kb) {
            s[kb][0] = s[kb][1] = s[kb][2] = s[kb][3] = 0;
            const __nv_bfloat16* krow = ks[buf][sub * 16 + kb * 8 + g];
#pragma unroll
            for (int kk = 0; kk < kHeadDim / 16; ++kk) {
              const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 2 * t);
              const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8 + 2 * t);
              Mma(s[kb], qa[kk], b0, b1);
            }
          }
          float new_m[2], corr[2], ms[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float tile_max = -INFINITY;
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int j = klo + tile * kTile + sub * 16 + kb * 8 + 2 * t + e;
                float& v = s[kb][2 * half + e];
                v = j >= lo_of[half] && j <= pos_of[half] ? v * scale : -INFINITY;
                tile_max = fmaxf(tile_max, v);
              }
            }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            new_m[half] = fmaxf(m_run[half], tile_max);
            ms[half] = new_m[half] == -INFINITY ? 0.0f : new_m[half];  // no valid key yet: nothing to scale
            corr[half] = __expf(m_run[half] - ms[half]);
            m_run[half] = new_m[half];
          }
          float p[2][4];
#pragma unroll
          for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) p[kb][e] = __expf(s[kb][e] - ms[e >> 1]);
          }
          l_run[0] = l_run[0] * corr[0] + p[0][0] + p[0][1] + p[1][0] + p[1][1];
          l_run[1] = l_run[1] * corr[1] + p[0][2] + p[0][3] + p[1][2] + p[1][3];
#pragma unroll
          for (int nb = 0; nb < kHeadDim / 8; ++nb) {
            acc[nb][0] *= corr[0];
            acc[nb][1] *= corr[0];
            acc[nb][2] *= corr[1];
            acc[nb][3] *= corr[1];
          }
          // P as the A operand: rows g / g + 8, keys 2t, 2t + 1 and 8 + 2t, 8 + 2t + 1.
          const uint32_t pa[4] = {PackBf16(p[0][0], p[0][1]), PackBf16(p[0][2], p[0][3]), PackBf16(p[1][0], p[1][1]),
                                  PackBf16(p[1][2], p[1][3])};
#pragma unroll
          for (int pair = 0; pair < kHeadDim / 16; ++pair) {
            uint32_t b[4];
            LdMatrixX4Trans(b, &vs[buf][sub * 16 + vkey][(2 * pair + (lane >> 4)) * 8]);
            Mma(acc[2 * pair], pa, b[0], b[1]);
            Mma(acc[2 * pair + 1], pa, b[2], b[3]);
          }
        }
      }
      __syncthreads();  // the tile is read before a later copy overwrites its buffer
    }

#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if (row_of[half] >= 0) {
        const float inv = l > 0 ? 1.0f / l : 0.0f;
        const int m = g + 8 * half;
        uint32_t* orow =
            reinterpret_cast<uint32_t*>(o + (static_cast<int64_t>(row_of[half]) * n_heads + h0 + m % group) * kHeadDim);
#pragma unroll
        for (int nb = 0; nb < kHeadDim / 8; ++nb) {
          orow[nb * 4 + t] = PackBf16(acc[nb][2 * half] * inv, acc[nb][2 * half + 1] * inv);
        }
      }
    }
    run_lo = run_hi;
  }
}

}  // namespace

bool GqaPrefillSupports(int n_heads, int n_kv_heads, int head_dim, int kv_dim) {
  static const bool off = [] {
    const char* v = std::getenv("FLOTILLA_CUDA_ATTN");
    return v != nullptr && std::string(v).size() > 0;  // a forced attention kernel keeps prefill rows on it too
  }();
  return !off && GqaAttentionSupports(n_heads, n_kv_heads, head_dim, kv_dim);
}

cudaError_t LaunchGqaPrefill(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                             int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int group = n_heads / n_kv_heads;
  if (group > 8 || 16 % group != 0 || n_heads % n_kv_heads != 0 || kv.kv_dim % 8 != 0) return cudaErrorInvalidValue;
  const int per_block = kWarps * (16 / group);
  dim3 grid((rows + per_block - 1) / per_block, n_kv_heads);
  GqaPrefillMmaKernel<<<grid, kWarps * 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions, row_seq,
                                                        kv, layer, rows, n_heads, group, window,
                                                        reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
