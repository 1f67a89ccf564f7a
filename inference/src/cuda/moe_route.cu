// The MoE block's front half in three kernels instead of six: the FFN norm, the router product
// and its top-k in one (NormRouteKernel), each expert's count per block scanned over the blocks
// (ScanCountsKernel), then the dispatch plan, the gather of each expert's rows and the
// per-expert row counts for the host (DispatchKernel).
#include <cuda_bf16.h>

#include "moe_group_ptrs.cuh"
#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 16;
constexpr int kRouteThreads = 512;
constexpr int kRouteWarps = kRouteThreads / 32;
constexpr int kDispatchThreads = 256;

__device__ __forceinline__ void Bf16x8ToFloat(const uint4& u, float* f) {
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const float2 p = __bfloat1622float2(b[t]);
    f[2 * t] = p.x;
    f[2 * t + 1] = p.y;
  }
}

// A block of RB rows. 1) Each row's RMS norm (the reduction as RmsNormVecKernel's), its bf16
// result kept in shared memory and written to xn. 2) Warp w computes the router logits of the
// experts w, w + 16, ... for all RB rows at once, so each router row is read once per block.
// 3) One warp per row: softmax, top-k (ties: the lower id), weights (renormalised or not) as
// RouterTopKKernel computes them. 4) The block's entries per expert, for DispatchKernel's places.
template <int RB>
__global__ void __launch_bounds__(kRouteThreads)
    NormRouteKernel(const float4* x, const float4* norm_w, const uint4* router, int rows, int dim, int n_experts,
                    int top_k, float eps, uint2* xn, int32_t* experts, float* weights, int32_t* block_counts,
                    bool renormalize) {
  extern __shared__ uint4 xs[];  // RB rows of dim bf16
  __shared__ float partial[kRouteWarps][RB];
  __shared__ float scale[RB];
  __shared__ float logits[RB][kMaxExperts];
  __shared__ int32_t chosen[RB * kMaxTopK];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int row0 = blockIdx.x * RB;
  const int n = min(RB, rows - row0);
  const int vecs4 = dim / 4, vecs8 = dim / 8;
  float ss[RB];
#pragma unroll
  for (int rr = 0; rr < RB; ++rr) {
    ss[rr] = 0;
    if (rr < n) {
      for (int d = tid; d < vecs4; d += kRouteThreads) {
        const float4 v = x[static_cast<int64_t>(row0 + rr) * vecs4 + d];
        ss[rr] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
    }
    for (int off = 16; off > 0; off >>= 1) ss[rr] += __shfl_xor_sync(0xffffffffu, ss[rr], off);
    if (lane == 0) partial[warp][rr] = ss[rr];
  }
  __syncthreads();
  if (tid < RB) {
    float total = 0;
    for (int w = 0; w < kRouteWarps; ++w) total += partial[w][tid];
    scale[tid] = rsqrtf(total / dim + eps);
  }
  __syncthreads();
  uint2* xs2 = reinterpret_cast<uint2*>(xs);
  for (int rr = 0; rr < n; ++rr) {
    const float s = scale[rr];
    for (int d = tid; d < vecs4; d += kRouteThreads) {
      const float4 v = x[static_cast<int64_t>(row0 + rr) * vecs4 + d], g = norm_w[d];
      const __nv_bfloat162 a = __floats2bfloat162_rn(v.x * s * g.x, v.y * s * g.y);
      const __nv_bfloat162 b = __floats2bfloat162_rn(v.z * s * g.z, v.w * s * g.w);
      uint2 out;
      out.x = *reinterpret_cast<const uint32_t*>(&a);
      out.y = *reinterpret_cast<const uint32_t*>(&b);
      xs2[rr * vecs4 + d] = out;
      xn[static_cast<int64_t>(row0 + rr) * vecs4 + d] = out;
    }
  }
  __syncthreads();
  for (int e = warp; e < n_experts; e += kRouteWarps) {
    float acc[RB];
#pragma unroll
    for (int rr = 0; rr < RB; ++rr) acc[rr] = 0;
    const uint4* wr = router + static_cast<int64_t>(e) * vecs8;
#pragma unroll 4
    for (int v = lane; v < vecs8; v += 32) {
      float w[8];
      Bf16x8ToFloat(wr[v], w);
#pragma unroll
      for (int rr = 0; rr < RB; ++rr) {
        float a[8];
        Bf16x8ToFloat(xs[rr * vecs8 + v], a);
#pragma unroll
        for (int t = 0; t < 8; ++t) acc[rr] += a[t] * w[t];
      }
    }
#pragma unroll
    for (int rr = 0; rr < RB; ++rr) {
      for (int off = 16; off > 0; off >>= 1) acc[rr] += __shfl_xor_sync(0xffffffffu, acc[rr], off);
      if (lane == 0) logits[rr][e] = acc[rr];
    }
  }
  __syncthreads();
  // Warp rr picks row rr's experts: lane l holds the logits of experts l, l + 32, ...
  if (warp < n) {
    const int rr = warp;
    constexpr int kPerLane = kMaxExperts / 32;
    float v[kPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      v[j] = e < n_experts ? logits[rr][e] : -INFINITY;
      mx = fmaxf(mx, v[j]);
    }
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (lane + 32 * j < n_experts) sum += __expf(v[j] - mx);
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    uint32_t taken = 0;  // bit j: expert lane + 32 j already picked
    float prob[kMaxTopK];
    float total = 0;
    const int64_t r = row0 + rr;
    for (int k = 0; k < top_k; ++k) {
      // This lane's best untaken expert, then the warp's (higher logit; ties: lower id).
      float bv = -INFINITY;
      int be = n_experts;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e < n_experts && !(taken >> j & 1u) && (v[j] > bv || be == n_experts)) {
          bv = v[j];
          be = e;
        }
      }
      for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oe = __shfl_xor_sync(0xffffffffu, be, off);
        if (oe < n_experts && (be == n_experts || ov > bv || (ov == bv && oe < be))) {
          bv = ov;
          be = oe;
        }
      }
      if (be % 32 == lane) taken |= 1u << (be / 32);
      prob[k] = __expf(bv - mx) / sum;
      total += prob[k];
      if (lane == 0) {
        experts[r * top_k + k] = be;
        chosen[rr * top_k + k] = be;
      }
    }
    if (lane == 0) {
      for (int k = 0; k < top_k; ++k) weights[r * top_k + k] = renormalize ? prob[k] / total : prob[k];
    }
  }
  __syncthreads();
  for (int e = tid; e < n_experts; e += kRouteThreads) {
    int c = 0;
    for (int i = 0; i < n * top_k; ++i) c += chosen[i] == e;
    block_counts[static_cast<int64_t>(blockIdx.x) * n_experts + e] = c;
  }
}

// One block per expert: block_counts[b][e] becomes the entries of expert e in blocks before b
// (an exclusive scan down the column, 256 blocks at a time), and row `blocks` gets the total.
__global__ void __launch_bounds__(kDispatchThreads)
    ScanCountsKernel(int32_t* block_counts, int blocks, int n_experts) {
  __shared__ int32_t warp_sums[kDispatchThreads / 32];
  const int e = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int32_t carry = 0;
  for (int base = 0; base < blocks; base += kDispatchThreads) {
    const int b = base + tid;
    const int32_t c = b < blocks ? block_counts[static_cast<int64_t>(b) * n_experts + e] : 0;
    int32_t incl = c;
    for (int off = 1; off < 32; off <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int32_t warp_before = 0, chunk = 0;
    for (int w = 0; w < kDispatchThreads / 32; ++w) {
      warp_before += w < warp ? warp_sums[w] : 0;
      chunk += warp_sums[w];
    }
    if (b < blocks) block_counts[static_cast<int64_t>(b) * n_experts + e] = carry + warp_before + incl - c;
    carry += chunk;
    __syncthreads();  // warp_sums is rewritten by the next round
  }
  if (tid == 0) block_counts[static_cast<int64_t>(blocks) * n_experts + e] = carry;
}

// One block per NormRouteKernel block, after ScanCountsKernel: an entry's place is its
// expert's start (the totals summed over lower experts), plus the entries of earlier blocks,
// plus those of earlier rows in its own block: rows keep their order within an expert, as
// MoePlanKernel places them. Then the block copies its rows to their places. Block 0 also
// writes the offsets, the grouped product's pointer arrays and, where given, the counts and
// `ticket` to host-mapped memory (the ticket last).
__global__ void __launch_bounds__(kDispatchThreads)
    DispatchKernel(const int32_t* chosen, const int32_t* block_counts, int blocks, int rows_per_block, int rows,
                   int top_k, int n_experts, const uint4* xn, int vecs8, MoeGroupOperands ops, int32_t* offsets,
                   int32_t* src, int32_t* inv, void** ptrs, volatile int32_t* host_counts, int32_t ticket) {
  __shared__ int32_t total[kMaxExperts + 1];
  __shared__ int32_t before[kMaxExperts];
  __shared__ int32_t place[4 * kMaxTopK];
  const int tid = threadIdx.x, b = blockIdx.x;
  for (int e = tid; e < n_experts; e += kDispatchThreads) {
    total[e + 1] = block_counts[static_cast<int64_t>(blocks) * n_experts + e];
    before[e] = block_counts[static_cast<int64_t>(b) * n_experts + e];
  }
  __syncthreads();
  if (tid == 0) {
    total[0] = 0;
    for (int e = 0; e < n_experts; ++e) total[e + 1] += total[e];
  }
  __syncthreads();
  if (b == 0) {
    for (int e = tid; e <= n_experts; e += kDispatchThreads) offsets[e] = total[e];
    WriteGroupPointers(total, n_experts, ops, ptrs, tid, kDispatchThreads);
    if (host_counts != nullptr && tid == 0) {
      for (int e = 0; e < n_experts; ++e) host_counts[e] = total[e + 1] - total[e];
      __threadfence_system();
      host_counts[n_experts] = ticket;
    }
  }
  const int first = b * rows_per_block * top_k;
  const int entries = min(rows_per_block, rows - b * rows_per_block) * top_k;
  if (tid < entries) {
    const int i = first + tid;
    const int e = chosen[i];
    int rank = 0;
    for (int j = first; j < i; ++j) rank += chosen[j] == e;
    const int p = total[e] + before[e] + rank;
    place[tid] = p;
    src[p] = i / top_k;
    inv[i] = p;
  }
  __syncthreads();
  uint4* xe = reinterpret_cast<uint4*>(ops.xe);
  for (int k = tid; k < entries * vecs8; k += kDispatchThreads) {
    const int j = k / vecs8, v = k % vecs8;
    xe[static_cast<int64_t>(place[j]) * vecs8 + v] = xn[static_cast<int64_t>((first + j) / top_k) * vecs8 + v];
  }
}

template <int RB>
cudaError_t LaunchRoute(const MoeRouteArgs& a, int blocks, size_t smem) {
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(NormRouteKernel<RB>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  NormRouteKernel<RB><<<blocks, kRouteThreads, smem, a.stream>>>(
      reinterpret_cast<const float4*>(a.x), reinterpret_cast<const float4*>(a.norm_w), reinterpret_cast<const uint4*>(a.router),
      a.rows, a.dim, a.n_experts, a.top_k, a.eps, reinterpret_cast<uint2*>(a.xn), a.experts, a.weights, a.block_counts,
      a.renormalize);
  return cudaGetLastError();
}

}  // namespace

bool MoeRouteSupports(int dim, int n_experts, int top_k) {
  return dim % 8 == 0 && dim <= 16384 && n_experts <= kMaxExperts && top_k <= kMaxTopK && top_k <= n_experts;
}

int MoeRouteBlocks(int rows) { return (rows + MoeRouteRowsPerBlock(rows) - 1) / MoeRouteRowsPerBlock(rows); }
int MoeRouteRowsPerBlock(int rows) { return rows >= 1024 ? 4 : 2; }

cudaError_t LaunchMoeRoute(const MoeRouteArgs& a) {
  if (a.rows == 0) return cudaSuccess;
  if (!MoeRouteSupports(a.dim, a.n_experts, a.top_k)) return cudaErrorInvalidValue;
  const int rb = MoeRouteRowsPerBlock(a.rows), blocks = MoeRouteBlocks(a.rows);
  const size_t smem = static_cast<size_t>(rb) * a.dim * 2;
  cudaError_t err = rb == 4 ? LaunchRoute<4>(a, blocks, smem) : LaunchRoute<2>(a, blocks, smem);
  if (err != cudaSuccess) return err;
  ScanCountsKernel<<<a.n_experts, kDispatchThreads, 0, a.stream>>>(a.block_counts, blocks, a.n_experts);
  DispatchKernel<<<blocks, kDispatchThreads, 0, a.stream>>>(
      a.experts, a.block_counts, blocks, rb, a.rows, a.top_k, a.n_experts, reinterpret_cast<const uint4*>(a.xn),
      a.dim / 8, a.ops, a.offsets, a.src, a.inv, a.ptrs, a.host_counts, a.ticket);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
