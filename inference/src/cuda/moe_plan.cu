#include "moe_group_ptrs.cuh"
#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kMaxExperts = 256;
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// One block. Counts each expert's (row, slot) entries, then places the entries chunk by chunk
// in row order: an entry's place is its expert's running start, plus the entries of the same
// expert in earlier warps of the chunk, plus those in earlier lanes of its own warp (found with
// __match_any_sync). Deterministic: no order depends on timing. With ops given, also writes
// the grouped product's pointer arrays (the g-th expert with rows, ascending id).
__global__ void __launch_bounds__(kThreads)
    MoePlanKernel(const int32_t* chosen, int n, int top_k, int n_experts, int32_t* offsets, int32_t* src,
                  int32_t* inv, MoeGroupOperands ops, void** ptrs) {
  __shared__ int32_t start[kMaxExperts + 1];
  __shared__ int32_t warp_count[kWarps][kMaxExperts];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int e = tid; e <= n_experts; e += kThreads) start[e] = 0;
  __syncthreads();
  for (int i = tid; i < n; i += kThreads) atomicAdd(&start[chosen[i] + 1], 1);
  __syncthreads();
  if (tid == 0) {
    for (int e = 0; e < n_experts; ++e) start[e + 1] += start[e];
  }
  __syncthreads();
  for (int e = tid; e <= n_experts; e += kThreads) offsets[e] = start[e];
  if (ptrs != nullptr) {
    WriteGroupPointers(start, n_experts, ops, ptrs, tid, kThreads);
  }
  const unsigned lower = (1u << lane) - 1;
  for (int base = 0; base < n; base += kThreads) {
    for (int k = tid; k < kWarps * n_experts; k += kThreads) warp_count[k / n_experts][k % n_experts] = 0;
    __syncthreads();
    const int i = base + tid;
    const int e = i < n ? chosen[i] : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & lower);
    if (e >= 0 && rank == 0) warp_count[warp][e] = __popc(same);
    __syncthreads();
    if (e >= 0) {
      int pos = start[e] + rank;
      for (int w = 0; w < warp; ++w) pos += warp_count[w][e];
      src[pos] = i / top_k;
      inv[i] = pos;
    }
    __syncthreads();
    for (int x = tid; x < n_experts; x += kThreads) {
      int sum = 0;
      for (int w = 0; w < kWarps; ++w) sum += warp_count[w][x];
      start[x] += sum;
    }
    __syncthreads();
  }
}

}  // namespace

cudaError_t LaunchMoePlan(const int32_t* chosen, int rows, int top_k, int n_experts, int32_t* offsets, int32_t* src,
                          int32_t* inv, const MoeGroupOperands* ops, void** ptrs, cudaStream_t stream) {
  if (n_experts > kMaxExperts || (ptrs != nullptr && ops == nullptr)) return cudaErrorInvalidValue;
  MoePlanKernel<<<1, kThreads, 0, stream>>>(chosen, rows * top_k, top_k, n_experts, offsets, src, inv,
                                            ops != nullptr ? *ops : MoeGroupOperands{}, ptrs);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
