// Grouped-query paged attention for prefill chunks (head_dim 128) on the tensor cores: the same
// function as LaunchGqaAttentionMma, but one block of W warps per KV head and run of
// consecutive rows of one sequence, so each K/V tile is read from the pages once for up to
// W * F * 16 / G rows instead of once per row. A warp holds F m16 fragments, each 16 / G query
// rows times the G query heads of the KV head (all 16 rows of m16n8k16 in use), so every K and
// V fragment it reads from shared memory feeds F products; the W warps share each tile of 32
// keys, copied asynchronously into shared memory one tile ahead of the products:
//   S = Q K^T, online softmax per (row, head) in f32 registers (base 2), O += P V (P from S's
//   registers)
// Each row masks the keys outside [its window's start, its position] (skipped for 16 keys that
// every row of the warp sees). A block's rows that belong to different sequences are taken as
// separate runs, one after another.
// The kernel template; gqa_prefill_mma.cu instantiates its block shapes and launches it.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "mma_sync.cuh"
#include "ops.cuh"

namespace flotilla::inference::cuda::prefill {

using mma_sync::CopyAsync16;
using mma_sync::CopyCommit;
using mma_sync::CopyWaitAllButOne;
using mma_sync::LdMatrixX4;
using mma_sync::LdMatrixX4Trans;
using mma_sync::Mma;
using mma_sync::PackBf16;

constexpr int kHeadDim = 128;
constexpr int kTile = 32;           // keys per shared tile
constexpr int kRow = kHeadDim + 8;  // padded shared row (272 bytes): conflict-free fragment reads

// kWarps warps of kFrags m16 fragments each: a warp's rows are kFrags * 16 / G query rows (G
// heads each), and each K/V fragment read from shared memory feeds kFrags products.
template <int kWarps, int kFrags>
__global__ void __launch_bounds__(kWarps * 32)
    GqaPrefillMmaKernel(const __nv_bfloat16* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                        int layer, int rows, int n_heads, int group, int window, __nv_bfloat16* o) {
  __shared__ __align__(16) __nv_bfloat16 ks[2][kTile][kRow];
  __shared__ __align__(16) __nv_bfloat16 vs[2][kTile][kRow];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kvh = blockIdx.y, h0 = kvh * group;
  const int per_frag = 16 / group, per_warp = kFrags * per_frag, per_block = kWarps * per_warp;
  // The last rows first: in a prefill chunk they have the most keys, so the long blocks start
  // in the first wave and the short ones fill the tail.
  const int block_lo = (gridDim.x - 1 - blockIdx.x) * per_block, block_hi = min(block_lo + per_block, rows);
  const int P = kv.page_tokens;
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages) +
                              static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * kHeadDim;
  const int64_t v_rel = static_cast<int64_t>(P) * kv.kv_dim;
  // exp(x * scale) as exp2(x * c): the softmax runs in base 2 on the unscaled scores.
  const float c = rsqrtf(static_cast<float>(kHeadDim)) * 1.4426950408889634f;
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

    // This lane's mma rows: m = g and g + 8 of each fragment, each a (row, head) of the warp.
    int pos_of[kFrags][2], lo_of[kFrags][2];
    uint32_t qa[kFrags][kHeadDim / 16][4];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m = g + 8 * half;
        const int r = run_lo + (warp * kFrags + f) * per_frag + m / group;
        const bool valid = r < run_hi;
        pos_of[f][half] = valid ? positions[r] : -1;
        lo_of[f][half] = valid && window > 0 ? max(0, pos_of[f][half] - window + 1) : 0;
        const uint32_t* qr = reinterpret_cast<const uint32_t*>(
            q + (static_cast<int64_t>(valid ? r : 0) * n_heads + h0 + m % group) * kHeadDim);
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
          qa[f][kk][half] = valid ? qr[kk * 8 + t] : 0u;
          qa[f][kk][2 + half] = valid ? qr[kk * 8 + 4 + t] : 0u;
        }
      }
    }
    const bool warp_busy = run_lo + warp * per_warp < run_hi;
    // The keys every row of the warp sees: [lo_max, pos_min] (empty when a row is idle).
    int pos_min = INT32_MAX, lo_max = 0;
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        pos_min = min(pos_min, pos_of[f][half]);
        lo_max = max(lo_max, lo_of[f][half]);
      }
    }
    pos_min = __reduce_min_sync(0xffffffffu, pos_min);
    lo_max = __reduce_max_sync(0xffffffffu, lo_max);

    // Thread i copies pieces i, i + 32 * kWarps, ... of a tile's 32 keys x 16 pieces, K and V.
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

    float m_run[kFrags][2], l_run[kFrags][2];
    float acc[kFrags][kHeadDim / 8][4];  // O[row g: 0, 1 | row g + 8: 2, 3][dims nb * 8 + 2t, +1]
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      m_run[f][0] = m_run[f][1] = -INFINITY;
      l_run[f][0] = l_run[f][1] = 0;
#pragma unroll
      for (int nb = 0; nb < kHeadDim / 8; ++nb) acc[f][nb][0] = acc[f][nb][1] = acc[f][nb][2] = acc[f][nb][3] = 0;
    }

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
          const int j0 = klo + tile * kTile + sub * 16;
          // S = Q K^T for 16 keys: each ldmatrix gives the B operands of two k-steps.
          float s[kFrags][2][4];
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) s[f][kb][0] = s[f][kb][1] = s[f][kb][2] = s[f][kb][3] = 0;
          }
#pragma unroll
          for (int kk2 = 0; kk2 < kHeadDim / 32; ++kk2) {
            uint32_t b[2][4];
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
              LdMatrixX4(b[kb], &ks[buf][sub * 16 + kb * 8 + (lane & 7)][kk2 * 32 + (lane >> 3) * 8]);
            }
            // 2 * kFrags independent chains, one step each, then the next k-step.
#pragma unroll
            for (int step = 0; step < 2; ++step) {
#pragma unroll
              for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
                for (int f = 0; f < kFrags; ++f) Mma(s[f][kb], qa[f][2 * kk2 + step], b[kb][2 * step], b[kb][2 * step + 1]);
              }
            }
          }
          // Keys outside a row's [window start, position] masked; skipped when the warp's rows
          // all see the 16 keys whole.
          const bool mask = j0 < lo_max || j0 + 15 > pos_min;
          uint32_t pa[kFrags][4];
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
            float corr[2], ms[2];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              float tile_max = -INFINITY;
#pragma unroll
              for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  float& v = s[f][kb][2 * half + e];
                  if (mask) {
                    const int j = j0 + kb * 8 + 2 * t + e;
                    v = j >= lo_of[f][half] && j <= pos_of[f][half] ? v : -INFINITY;
                  }
                  tile_max = fmaxf(tile_max, v);
                }
              }
              tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
              tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
              const float new_m = fmaxf(m_run[f][half], tile_max);
              ms[half] = new_m == -INFINITY ? 0.0f : new_m * c;  // no valid key yet: nothing to scale
              corr[half] = exp2f(m_run[f][half] * c - ms[half]);
              m_run[f][half] = new_m;
            }
            float p[2][4];
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
              for (int e = 0; e < 4; ++e) p[kb][e] = exp2f(fmaf(s[f][kb][e], c, -ms[e >> 1]));
            }
            l_run[f][0] = l_run[f][0] * corr[0] + p[0][0] + p[0][1] + p[1][0] + p[1][1];
            l_run[f][1] = l_run[f][1] * corr[1] + p[0][2] + p[0][3] + p[1][2] + p[1][3];
            if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
              for (int nb = 0; nb < kHeadDim / 8; ++nb) {
                acc[f][nb][0] *= corr[0];
                acc[f][nb][1] *= corr[0];
                acc[f][nb][2] *= corr[1];
                acc[f][nb][3] *= corr[1];
              }
            }
            // P as the A operand: rows g / g + 8, keys 2t, 2t + 1 and 8 + 2t, 8 + 2t + 1.
            pa[f][0] = PackBf16(p[0][0], p[0][1]);
            pa[f][1] = PackBf16(p[0][2], p[0][3]);
            pa[f][2] = PackBf16(p[1][0], p[1][1]);
            pa[f][3] = PackBf16(p[1][2], p[1][3]);
          }
#pragma unroll
          for (int pair = 0; pair < kHeadDim / 16; ++pair) {
            uint32_t b[4];
            LdMatrixX4Trans(b, &vs[buf][sub * 16 + vkey][(2 * pair + (lane >> 4)) * 8]);
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
              Mma(acc[f][2 * pair], pa[f], b[0], b[1]);
              Mma(acc[f][2 * pair + 1], pa[f], b[2], b[3]);
            }
          }
        }
      }
      __syncthreads();  // the tile is read before a later copy overwrites its buffer
    }

#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float l = l_run[f][half];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int m = g + 8 * half;
        const int r = run_lo + (warp * kFrags + f) * per_frag + m / group;
        if (r < run_hi) {
          const float inv = l > 0 ? 1.0f / l : 0.0f;
          uint32_t* orow =
              reinterpret_cast<uint32_t*>(o + (static_cast<int64_t>(r) * n_heads + h0 + m % group) * kHeadDim);
#pragma unroll
          for (int nb = 0; nb < kHeadDim / 8; ++nb) {
            orow[nb * 4 + t] = PackBf16(acc[f][nb][2 * half] * inv, acc[f][nb][2 * half + 1] * inv);
          }
        }
      }
    }
    run_lo = run_hi;
  }
}

}  // namespace flotilla::inference::cuda::prefill
