// DeepSeek-V3's multi-head latent attention, after its projections: assembles each head's query,
// key and value from the decompressed latent and writes K and V into the paged cache in the
// backend's per-head layout (K [nope | rope], V [v | zeros] padded to the key's width, so the
// attention kernels and pages of the other families serve it unchanged). RoPE covers only the
// last rope_dim values of each query head and the one key rotation shared by all heads,
// rotating pairs (2i, 2i+1) when `interleave`, halves otherwise (yarn's factor on cos and sin
// comes with the rotations), and q is scaled by q_scale (the softmax scale relative to
// 1/sqrt(key width)).
#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__device__ __forceinline__ __nv_bfloat16* MlaKvSlot(const KvGeometry& kv, int seq, int pos, int layer, int which) {
  const int page = kv.table[seq * kv.table_stride + pos / kv.page_tokens];
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * kv.page_tokens * kv.kv_dim;
  const int64_t off = ((static_cast<int64_t>(layer) * 2 + which) * kv.page_tokens + pos % kv.page_tokens) * kv.kv_dim;
  return reinterpret_cast<__nv_bfloat16*>(kv.pages) + page * page_elems + off;
}

// One block per row.
__global__ void MlaRopeKvKernel(const __nv_bfloat16* q, const __nv_bfloat16* k_rope, const __nv_bfloat16* kv_b,
                                const int32_t* positions, const int32_t* row_seq, const float2* rot, KvGeometry kv,
                                int layer, MlaShape s, __nv_bfloat16* q_out) {
  const int r = blockIdx.x;
  const int pos = positions[r], seq = row_seq[r];
  const int kd = s.nope + s.rope, half = s.rope / 2;
  __nv_bfloat16* k_dst = MlaKvSlot(kv, seq, pos, layer, 0);
  __nv_bfloat16* v_dst = MlaKvSlot(kv, seq, pos, layer, 1);
  const float2* cs = rot + static_cast<int64_t>(r) * half;
  const __nv_bfloat16* qr = q + static_cast<int64_t>(r) * s.heads * kd;
  __nv_bfloat16* qo = q_out + static_cast<int64_t>(r) * s.heads * kd;
  const __nv_bfloat16* kr = k_rope + static_cast<int64_t>(r) * s.rope;
  const __nv_bfloat16* kvr = kv_b + static_cast<int64_t>(r) * s.heads * (s.nope + s.v);
  // The rotated key part, the same for every head, kept in shared memory.
  extern __shared__ float krot[];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const int i1 = s.interleave ? 2 * i : i, i2 = s.interleave ? 2 * i + 1 : i + half;
    const float c = cs[i].x, sn = cs[i].y;
    const float x1 = __bfloat162float(kr[i1]), x2 = __bfloat162float(kr[i2]);
    krot[i1] = x1 * c - x2 * sn;
    krot[i2] = x2 * c + x1 * sn;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < s.heads * kd; t += blockDim.x) {
    const int h = t / kd, d = t % kd;
    // The query: nope values as they are, the rope values rotated (each thread the pair's first).
    if (d < s.nope) {
      qo[t] = __float2bfloat16(__bfloat162float(qr[t]) * s.q_scale);
    } else {
      const int j = d - s.nope;
      const bool first = s.interleave ? (j % 2 == 0) : (j < half);
      if (first) {
        const int i = s.interleave ? j / 2 : j, j2 = s.interleave ? j + 1 : j + half;
        const float c = cs[i].x, sn = cs[i].y;
        const float x1 = __bfloat162float(qr[h * kd + s.nope + j]), x2 = __bfloat162float(qr[h * kd + s.nope + j2]);
        qo[h * kd + s.nope + j] = __float2bfloat16((x1 * c - x2 * sn) * s.q_scale);
        qo[h * kd + s.nope + j2] = __float2bfloat16((x2 * c + x1 * sn) * s.q_scale);
      }
    }
    // The key and the value (zero past v).
    const __nv_bfloat16* src = kvr + static_cast<int64_t>(h) * (s.nope + s.v);
    k_dst[t] = d < s.nope ? src[d] : __float2bfloat16(krot[d - s.nope]);
    v_dst[t] = d < s.v ? src[s.nope + d] : __float2bfloat16(0.0f);
  }
}

}  // namespace

cudaError_t LaunchMlaRopeKvWrite(const uint16_t* q, const uint16_t* k_rope, const uint16_t* kv_b,
                                 const int32_t* positions, const int32_t* row_seq, const float* rot, KvGeometry kv,
                                 int layer, int rows, const MlaShape& shape, uint16_t* q_out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (shape.v > shape.nope + shape.rope || kv.kv_dim != shape.heads * (shape.nope + shape.rope)) {
    return cudaErrorInvalidValue;
  }
  MlaRopeKvKernel<<<rows, 256, shape.rope * sizeof(float), stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(q), reinterpret_cast<const __nv_bfloat16*>(k_rope),
      reinterpret_cast<const __nv_bfloat16*>(kv_b), positions, row_seq, reinterpret_cast<const float2*>(rot), kv,
      layer, shape, reinterpret_cast<__nv_bfloat16*>(q_out));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
