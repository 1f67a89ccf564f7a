// Launches the prefill attention (gqa_prefill_kernel.cuh) in one of its block shapes.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "gqa_prefill_kernel.cuh"
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

// Block shapes: warps per block x m16 fragments per warp. FLOTILLA_CUDA_PREFILL=WxF picks one
// (4x1 is the first version's shape) for comparison runs; the default is 8x2, the fastest on
// the H200 (bench/RESULTS.md).
using PrefillKernel = void (*)(const __nv_bfloat16*, const int32_t*, const int32_t*, KvGeometry, int, int, int, int,
                               int, __nv_bfloat16*);
struct PrefillShape {
  int warps, frags;
  PrefillKernel kernel;
};
constexpr PrefillShape kShapes[] = {{8, 2, prefill::GqaPrefillMmaKernel<8, 2>},
                                    {4, 1, prefill::GqaPrefillMmaKernel<4, 1>},
                                    {4, 2, prefill::GqaPrefillMmaKernel<4, 2>},
                                    {8, 1, prefill::GqaPrefillMmaKernel<8, 1>}};
const PrefillShape* FindShape(int warps, int frags) {
  if (warps == 0 && frags == 0) {
    static const PrefillShape* chosen = [] {
      const char* v = std::getenv("FLOTILLA_CUDA_PREFILL");
      for (const PrefillShape& s : kShapes) {
        if (v != nullptr && std::string(v) == std::to_string(s.warps) + "x" + std::to_string(s.frags)) return &s;
      }
      return &kShapes[0];
    }();
    return chosen;
  }
  for (const PrefillShape& s : kShapes) {
    if (s.warps == warps && s.frags == frags) return &s;
  }
  return nullptr;
}

}  // namespace

cudaError_t LaunchGqaPrefill(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                             int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                             cudaStream_t stream, int warps, int frags) {
  const PrefillShape* found = FindShape(warps, frags);
  if (found == nullptr) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const int group = n_heads / n_kv_heads;
  if (group > 8 || 16 % group != 0 || n_heads % n_kv_heads != 0 || kv.kv_dim % 8 != 0) return cudaErrorInvalidValue;
  const PrefillShape shape = *found;
  const int per_block = shape.warps * shape.frags * (16 / group);
  dim3 grid((rows + per_block - 1) / per_block, n_kv_heads);
  shape.kernel<<<grid, shape.warps * 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(q), positions, row_seq, kv,
                                                      layer, rows, n_heads, group, window,
                                                      reinterpret_cast<__nv_bfloat16*>(o));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
