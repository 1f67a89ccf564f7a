// Grouped-query paged attention for prefill chunks (head_dim 128) on the tensor cores, in the
// FlashAttention-2 arrangement: one block of 8 warps per KV head and run of consecutive rows of
// one sequence, 256 (row, head) pairs a block (256 / G rows times the G query heads of the KV
// head), 32 a warp (two m16 fragments). The block's queries sit in shared memory (ldmatrix per
// product); K and V come in tiles of 64 keys, copied asynchronously into a three-stage ring two
// tiles ahead of the products (one barrier a tile). Per tile and warp:
//   S = Q K^T (64 keys, f32 registers), online softmax per (row, head) in base 2 with a lazily
//   moved reference max, O += P V (P packed to bf16 from S's registers)
// Each row masks the keys outside [its window's start, its position]; the mask is skipped for a
// tile every row of the warp sees whole, and the run's tiles end at its last row's position
// (causal tiles skipped). Blocks start with the last rows (the longest) first. A block's rows
// that belong to different sequences are taken as separate runs, one after another.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "mma_sync.cuh"
#include "ops.cuh"

namespace flotilla::inference::cuda {

bool GqaPrefillSupports(int n_heads, int n_kv_heads, int head_dim, int kv_dim) {
  static const bool off = [] {
    const char* v = std::getenv("FLOTILLA_CUDA_ATTN");
    return v != nullptr && std::string(v).size() > 0;  // a forced attention kernel keeps prefill rows on it too
  }();
  return !off && GqaAttentionSupports(n_heads, n_kv_heads, head_dim, kv_dim);
}

namespace {

using mma_sync::CopyAsync16;
using mma_sync::CopyCommit;
using mma_sync::CopyWaitAllButOne;
using mma_sync::LdMatrixX4;
using mma_sync::LdMatrixX4Trans;
using mma_sync::Mma;
using mma_sync::PackBf16;

constexpr int kHeadDim = 128;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kFrags = 2;                        // m16 fragments per warp
constexpr int kPairs = kWarps * kFrags * 16;     // (row, head) pairs per block
constexpr int kTile = 64;                        // keys per shared tile
constexpr int kRow = kHeadDim + 8;               // padded shared row (272 bytes): conflict-free ldmatrix
constexpr int kStages = 3;                       // K/V tiles in the ring
constexpr int kNb = kTile / 8;                   // n8 blocks of S per fragment
constexpr float kLazyMax = 8.0f;                 // log2 of the largest weight before the reference max moves
constexpr size_t kSmemBytes = sizeof(__nv_bfloat16) * kRow * (kPairs + 2 * kStages * kTile);

// 2^x on the special-function unit alone (denormal results flushed to 0: weights under 2^-126
// of the row's largest).
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// kWindowed: rows see only the last `window` keys (false: window is 0, every row from key 0).
template <bool kWindowed>
__global__ void __launch_bounds__(kThreads, 1)
    GqaPrefillFlashKernel(const __nv_bfloat16* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                          int layer, int rows, int n_heads, int group, int window, __nv_bfloat16* o) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* qs = reinterpret_cast<__nv_bfloat16(*)[kRow]>(smem);                    // [kPairs][kRow]
  auto* ks = reinterpret_cast<__nv_bfloat16(*)[kTile][kRow]>(qs + kPairs);      // [kStages][kTile][kRow]
  auto* vs = reinterpret_cast<__nv_bfloat16(*)[kTile][kRow]>(ks + kStages);     // [kStages][kTile][kRow]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kvh = blockIdx.y, h0 = kvh * group;
  const int per_block = kPairs / group;
  const int block_lo = (gridDim.x - 1 - blockIdx.x) * per_block, block_hi = min(block_lo + per_block, rows);
  const int P = kv.page_tokens;
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * P * kv.kv_dim;
  const __nv_bfloat16* base = reinterpret_cast<const __nv_bfloat16*>(kv.pages) +
                              static_cast<int64_t>(layer) * 2 * P * kv.kv_dim + kvh * kHeadDim;
  const int64_t v_rel = static_cast<int64_t>(P) * kv.kv_dim;
  const float c = rsqrtf(static_cast<float>(kHeadDim)) * 1.4426950408889634f;  // exp(x / sqrt(d)) = exp2(x c)

  for (int run_lo = block_lo; run_lo < block_hi;) {
    const int seq = row_seq[run_lo];
    int run_hi = run_lo + 1;
    while (run_hi < block_hi && row_seq[run_hi] == seq) ++run_hi;
    // The run's key span, over its rows' windows: a reduction over the block.
    int klo = INT32_MAX, khi = -1;
    for (int r = run_lo + threadIdx.x; r < run_hi; r += kThreads) {
      const int pos = positions[r];
      klo = min(klo, kWindowed ? max(0, pos - window + 1) : 0);
      khi = max(khi, pos);
    }
    klo = __reduce_min_sync(0xffffffffu, klo);
    khi = __reduce_max_sync(0xffffffffu, khi);
    __shared__ int span[2][kWarps];
    if (lane == 0) {
      span[0][warp] = klo;
      span[1][warp] = khi;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      klo = min(klo, span[0][w]);
      khi = max(khi, span[1][w]);
    }
    const int32_t* table = kv.table + static_cast<int64_t>(seq) * kv.table_stride;

    // The queries: pair i of the run is row run_lo + i / G, head h0 + i % G (zeros past the run).
#pragma unroll
    for (int i = 0; i < kPairs * 16 / kThreads; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      const int pair = idx >> 4, piece = idx & 15;
      const int r = run_lo + pair / group;
      const bool valid = r < run_hi;
      const __nv_bfloat16* src = q + (static_cast<int64_t>(valid ? r : 0) * n_heads + h0 + pair % group) * kHeadDim;
      CopyAsync16(&qs[pair][piece * 8], src + piece * 8, valid);
    }
    // This lane's mma rows: m = g and g + 8 of each fragment.
    int pos_of[kFrags][2], lo_of[kFrags][2];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = run_lo + ((warp * kFrags + f) * 16 + g + 8 * half) / group;
        const bool valid = r < run_hi;
        pos_of[f][half] = valid ? positions[r] : -1;
        lo_of[f][half] = kWindowed && valid ? max(0, pos_of[f][half] - window + 1) : 0;
      }
    }
    const bool warp_busy = run_lo + (warp * kFrags * 16) / group < run_hi;
    int pos_min = INT32_MAX, lo_max = 0;  // the keys every row of the warp sees: [lo_max, pos_min]
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

    // Thread i copies piece i % 16 of keys i / 16, i / 16 + 16, ... of a tile's 64 keys, K and V:
    // one division per tile, then the page steps along.
    const int my_key = threadIdx.x >> 4, piece = threadIdx.x & 15;
    auto issue = [&](int tile, int buf) {
      const int p0 = klo + tile * kTile + my_key;
      int page = p0 / P, in_page = p0 - page * P;
#pragma unroll
      for (int i = 0; i < kTile * 16 / kThreads; ++i) {
        const int key = my_key + i * (kThreads / 16);
        const bool valid = p0 + i * (kThreads / 16) <= khi;
        int64_t off = 0;
        if (valid) off = table[page] * page_elems + static_cast<int64_t>(in_page) * kv.kv_dim;
        CopyAsync16(&ks[buf][key][piece * 8], base + off + piece * 8, valid);
        CopyAsync16(&vs[buf][key][piece * 8], base + off + v_rel + piece * 8, valid);
        in_page += kThreads / 16;
        while (in_page >= P) {
          in_page -= P;
          ++page;
        }
      }
      CopyCommit();
    };

    float m_run[kFrags][2], l_run[kFrags][2];  // m_run: the scaled (base 2) reference max
    float acc[kFrags][kHeadDim / 8][4];  // O[row g: 0, 1 | row g + 8: 2, 3][dims nb * 8 + 2t, +1]
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      m_run[f][0] = m_run[f][1] = -INFINITY;
      l_run[f][0] = l_run[f][1] = 0;
#pragma unroll
      for (int nb = 0; nb < kHeadDim / 8; ++nb) acc[f][nb][0] = acc[f][nb][1] = acc[f][nb][2] = acc[f][nb][3] = 0;
    }

    const int tiles = (khi - klo + kTile) / kTile;
    issue(0, 0);  // the queries ride in the first tile's group
    if (tiles > 1) {
      issue(1, 1);
    } else {
      CopyCommit();  // an empty group keeps "all but one" meaning "this tile"
    }
    for (int tile = 0, buf = 0; tile < tiles; ++tile, buf = buf + 1 == kStages ? 0 : buf + 1) {
      CopyWaitAllButOne();
      // Tile `tile` has landed for every thread, and every warp is done with tile - 1, whose
      // buffer the copy of tile + 2 takes.
      __syncthreads();
      if (tile + 2 < tiles) {
        issue(tile + 2, buf == 0 ? kStages - 1 : buf - 1);
      } else {
        CopyCommit();
      }
      if (warp_busy) {
        const int j0 = klo + tile * kTile;
        // S = Q K^T over 64 keys: per 16 dims, the fragments' A by ldmatrix from the queries,
        // then per 16 keys one ldmatrix for the B of two n8 blocks.
        float s[kFrags][kNb][4];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
#pragma unroll
          for (int nb = 0; nb < kNb; ++nb) s[f][nb][0] = s[f][nb][1] = s[f][nb][2] = s[f][nb][3] = 0;
        }
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
          uint32_t a[kFrags][4];
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
            LdMatrixX4(a[f], &qs[(warp * kFrags + f) * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
          }
#pragma unroll
          for (int np = 0; np < kNb / 2; ++np) {
            uint32_t b[4];
            LdMatrixX4(b, &ks[buf][np * 16 + (lane & 7) + ((lane >> 4) << 3)][kk * 16 + ((lane >> 3) & 1) * 8]);
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
              Mma(s[f][2 * np], a[f], b[0], b[1]);
              Mma(s[f][2 * np + 1], a[f], b[2], b[3]);
            }
          }
        }
        // Keys outside a row's [window start, position] masked, only where some row of the warp
        // does not see the keys whole.
        if (j0 < lo_max || j0 + kTile - 1 > pos_min) {
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
#pragma unroll
            for (int nb = 0; nb < kNb; ++nb) {
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int j = j0 + nb * 8 + 2 * t + (e & 1);
                if (j < lo_of[f][e >> 1] || j > pos_of[f][e >> 1]) s[f][nb][e] = -INFINITY;
              }
            }
          }
        }
        uint32_t pa[kFrags][kNb / 2][4];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          float corr[2], ms[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float tile_max = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < kNb; ++nb) {
              tile_max = fmaxf(tile_max, fmaxf(s[f][nb][2 * half], s[f][nb][2 * half + 1]));
            }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            // The reference max moves only when the tile's exceeds it by more than 2^8 (weights
            // stay under 256, far from overflow in f32 and bf16), so O is rarely rescaled.
            const float tile_m = tile_max * c;
            corr[half] = 1.0f;
            if (tile_m > m_run[f][half] + kLazyMax) {
              corr[half] = Exp2(m_run[f][half] - tile_m);
              m_run[f][half] = tile_m;
            }
            ms[half] = m_run[f][half] == -INFINITY ? 0.0f : m_run[f][half];  // no valid key yet
          }
          float sum[2] = {0, 0};
#pragma unroll
          for (int nb = 0; nb < kNb; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[f][nb][e] = Exp2(fmaf(s[f][nb][e], c, -ms[e >> 1]));
              sum[e >> 1] += s[f][nb][e];
            }
          }
          l_run[f][0] = l_run[f][0] * corr[0] + sum[0];
          l_run[f][1] = l_run[f][1] * corr[1] + sum[1];
          if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int nb = 0; nb < kHeadDim / 8; ++nb) {
              acc[f][nb][0] *= corr[0];
              acc[f][nb][1] *= corr[0];
              acc[f][nb][2] *= corr[1];
              acc[f][nb][3] *= corr[1];
            }
          }
          // P as the A operand of each 16-key step: rows g / g + 8, keys 2t, 2t + 1, 8 + 2t, 9 + 2t.
#pragma unroll
          for (int ks16 = 0; ks16 < kNb / 2; ++ks16) {
            pa[f][ks16][0] = PackBf16(s[f][2 * ks16][0], s[f][2 * ks16][1]);
            pa[f][ks16][1] = PackBf16(s[f][2 * ks16][2], s[f][2 * ks16][3]);
            pa[f][ks16][2] = PackBf16(s[f][2 * ks16 + 1][0], s[f][2 * ks16 + 1][1]);
            pa[f][ks16][3] = PackBf16(s[f][2 * ks16 + 1][2], s[f][2 * ks16 + 1][3]);
          }
        }
        // O += P V: per 16 keys and 16 dims one transposed ldmatrix for two n8 blocks.
#pragma unroll
        for (int ks16 = 0; ks16 < kNb / 2; ++ks16) {
#pragma unroll
          for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            uint32_t b[4];
            LdMatrixX4Trans(b, &vs[buf][ks16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][(2 * dp + (lane >> 4)) * 8]);
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
              Mma(acc[f][2 * dp], pa[f][ks16], b[0], b[1]);
              Mma(acc[f][2 * dp + 1], pa[f][ks16], b[2], b[3]);
            }
          }
        }
      }
    }
    __syncthreads();  // every warp is done with the queries and the ring before the next run's copies

#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float l = l_run[f][half];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int pair = (warp * kFrags + f) * 16 + g + 8 * half;
        const int r = run_lo + pair / group;
        if (r < run_hi) {
          const float inv = l > 0 ? 1.0f / l : 0.0f;
          uint32_t* orow = reinterpret_cast<uint32_t*>(
              o + (static_cast<int64_t>(r) * n_heads + h0 + pair % group) * kHeadDim);
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

}  // namespace

cudaError_t LaunchGqaPrefill(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                             int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) return cudaErrorInvalidValue;
  const int group = n_heads / n_kv_heads;
  if (group > 16 || 16 % group != 0 || kv.kv_dim % 8 != 0) return cudaErrorInvalidValue;
  static const cudaError_t attr = [] {
    const cudaError_t a = cudaFuncSetAttribute(GqaPrefillFlashKernel<false>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    return a != cudaSuccess ? a
                            : cudaFuncSetAttribute(GqaPrefillFlashKernel<true>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  }();
  if (attr != cudaSuccess) return attr;
  const int per_block = kPairs / group;
  dim3 grid((rows + per_block - 1) / per_block, n_kv_heads);
  auto* kernel = window > 0 ? GqaPrefillFlashKernel<true> : GqaPrefillFlashKernel<false>;
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions,
                                                               row_seq, kv, layer, rows, n_heads, group, window,
                                                               reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
