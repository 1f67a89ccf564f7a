// Device code shared by the dispatch-plan kernels (moe_plan.cu, moe_route.cu).
#pragma once

#include "ops.cuh"

namespace flotilla::inference::cuda {

// From each expert's first place (start[0..n_experts], ascending), writes the pointer arrays of
// cublasGemmGroupedBatchedEx: ptrs[k * n_experts + g] for k = w13, xe, gu, w2, h, y of the g-th
// expert (ascending id) that has rows. Threads tid = 0, stride, 2 stride, ... share the experts.
__device__ inline void WriteGroupPointers(const int32_t* start, int n_experts, const MoeGroupOperands& ops, void** ptrs,
                                          int tid, int stride) {
  for (int e = tid; e < n_experts; e += stride) {
    const int64_t begin = start[e];
    if (start[e + 1] == begin) continue;
    int g = 0;
    for (int p = 0; p < e; ++p) g += start[p + 1] > start[p];
    ptrs[0 * n_experts + g] = const_cast<uint16_t*>(ops.w13) + e * ops.w13_stride;
    ptrs[1 * n_experts + g] = ops.xe + begin * ops.dim;
    ptrs[2 * n_experts + g] = ops.gu + begin * 2 * ops.hidden;
    ptrs[3 * n_experts + g] = const_cast<uint16_t*>(ops.w2) + e * ops.w2_stride;
    ptrs[4 * n_experts + g] = ops.h + begin * ops.hidden;
    ptrs[5 * n_experts + g] = ops.y + begin * ops.dim;
  }
}

}  // namespace flotilla::inference::cuda
