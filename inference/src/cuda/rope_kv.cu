#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__device__ __forceinline__ __nv_bfloat16* KvSlot(const KvGeometry& kv, int seq, int pos, int layer, int which) {
  const int page = kv.table[seq * kv.table_stride + pos / kv.page_tokens];
  const int64_t page_elems = static_cast<int64_t>(kv.n_layers) * 2 * kv.page_tokens * kv.kv_dim;
  const int64_t off = ((static_cast<int64_t>(layer) * 2 + which) * kv.page_tokens + pos % kv.page_tokens) * kv.kv_dim;
  return reinterpret_cast<__nv_bfloat16*>(kv.pages) + page * page_elems + off;
}

// rot[r * half + i] = scale * (cos, sin) of positions[r] * inv_freq[i], computed in double as the
// CPU backend does: once per forward, shared by every layer and head.
__global__ void RopeTableKernel(const int32_t* positions, const double* inv_freq, int rows, int half, float scale,
                                float2* rot) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= rows * half) return;
  double s, c;
  sincos(static_cast<double>(positions[k / half]) * inv_freq[k % half], &s, &c);
  rot[k] = make_float2(static_cast<float>(c * scale), static_cast<float>(s * scale));
}

__device__ __forceinline__ void Rotate(float x1, float x2, float2 cs, __nv_bfloat16* y1, __nv_bfloat16* y2) {
  *y1 = __float2bfloat16(x1 * cs.x - x2 * cs.y);
  *y2 = __float2bfloat16(x2 * cs.x + x1 * cs.y);
}

// One block per row; threads walk (head, i) pairs of q and k heads, then v.
__global__ void RopeKvKernel(const __nv_bfloat16* qkv, const int32_t* positions, const int32_t* row_seq,
                             const float2* rot, KvGeometry kv, int layer, int n_heads,
                             int n_kv_heads, int head_dim, __nv_bfloat16* q_out) {
  const int r = blockIdx.x;
  const int pos = positions[r];
  const int seq = row_seq[r];
  const int half = head_dim / 2;
  const int width = (n_heads + 2 * n_kv_heads) * head_dim;
  const __nv_bfloat16* row = qkv + static_cast<int64_t>(r) * width;
  __nv_bfloat16* k_dst = KvSlot(kv, seq, pos, layer, 0);
  __nv_bfloat16* v_dst = KvSlot(kv, seq, pos, layer, 1);
  const float2* cs = rot + static_cast<int64_t>(r) * half;
  const int pairs = (n_heads + n_kv_heads) * half;
  for (int t = threadIdx.x; t < pairs; t += blockDim.x) {
    const int head = t / half, i = t % half;
    const __nv_bfloat16* src = row + head * head_dim;
    __nv_bfloat16* dst = head < n_heads ? q_out + static_cast<int64_t>(r) * n_heads * head_dim + head * head_dim
                                        : k_dst + (head - n_heads) * head_dim;
    Rotate(__bfloat162float(src[i]), __bfloat162float(src[i + half]), cs[i], &dst[i], &dst[i + half]);
  }
  const __nv_bfloat16* v = row + (n_heads + n_kv_heads) * head_dim;
  for (int t = threadIdx.x; t < n_kv_heads * head_dim; t += blockDim.x) v_dst[t] = v[t];
}

// The same for head_dim % 8 == 0: four rotations a thread through 8-byte loads and stores,
// the value row copied in 16-byte pieces.
__global__ void RopeKvVecKernel(const __nv_bfloat16* qkv, const int32_t* positions, const int32_t* row_seq,
                                const float2* rot, KvGeometry kv, int layer, int n_heads, int n_kv_heads,
                                int head_dim, __nv_bfloat16* q_out) {
  const int r = blockIdx.x;
  const int pos = positions[r];
  const int seq = row_seq[r];
  const int half = head_dim / 2, quads = half / 4;
  const int width = (n_heads + 2 * n_kv_heads) * head_dim;
  const __nv_bfloat16* row = qkv + static_cast<int64_t>(r) * width;
  __nv_bfloat16* k_dst = KvSlot(kv, seq, pos, layer, 0);
  __nv_bfloat16* v_dst = KvSlot(kv, seq, pos, layer, 1);
  const float4* cs = reinterpret_cast<const float4*>(rot + static_cast<int64_t>(r) * half);
  const int items = (n_heads + n_kv_heads) * quads;
  for (int t = threadIdx.x; t < items; t += blockDim.x) {
    const int head = t / quads, i = (t % quads) * 4;
    const __nv_bfloat16* src = row + head * head_dim;
    __nv_bfloat16* dst = head < n_heads ? q_out + static_cast<int64_t>(r) * n_heads * head_dim + head * head_dim
                                        : k_dst + (head - n_heads) * head_dim;
    const uint2 a = *reinterpret_cast<const uint2*>(src + i), b = *reinterpret_cast<const uint2*>(src + i + half);
    const float4 c01 = cs[i / 2], c23 = cs[i / 2 + 1];
    const float2 c[4] = {make_float2(c01.x, c01.y), make_float2(c01.z, c01.w), make_float2(c23.x, c23.y),
                         make_float2(c23.z, c23.w)};
    const __nv_bfloat16* x1 = reinterpret_cast<const __nv_bfloat16*>(&a);
    const __nv_bfloat16* x2 = reinterpret_cast<const __nv_bfloat16*>(&b);
    uint2 o1, o2;
    __nv_bfloat16* y1 = reinterpret_cast<__nv_bfloat16*>(&o1);
    __nv_bfloat16* y2 = reinterpret_cast<__nv_bfloat16*>(&o2);
#pragma unroll
    for (int j = 0; j < 4; ++j) Rotate(__bfloat162float(x1[j]), __bfloat162float(x2[j]), c[j], &y1[j], &y2[j]);
    *reinterpret_cast<uint2*>(dst + i) = o1;
    *reinterpret_cast<uint2*>(dst + i + half) = o2;
  }
  const uint4* v = reinterpret_cast<const uint4*>(row + (n_heads + n_kv_heads) * head_dim);
  for (int t = threadIdx.x; t < n_kv_heads * head_dim / 8; t += blockDim.x) reinterpret_cast<uint4*>(v_dst)[t] = v[t];
}

}  // namespace

cudaError_t LaunchRopeTable(const int32_t* positions, const double* inv_freq, int rows, int half, float* rot,
                            cudaStream_t stream, float scale) {
  if (rows == 0) return cudaSuccess;
  const int n = rows * half;
  RopeTableKernel<<<(n + 255) / 256, 256, 0, stream>>>(positions, inv_freq, rows, half, scale,
                                                       reinterpret_cast<float2*>(rot));
  return cudaGetLastError();
}

cudaError_t LaunchRopeKvWrite(const uint16_t* qkv, const int32_t* positions, const int32_t* row_seq,
                              const float* rot, KvGeometry kv, int layer, int rows,
                              int n_heads, int n_kv_heads, int head_dim, uint16_t* q_out,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const auto* in = reinterpret_cast<const __nv_bfloat16*>(qkv);
  auto* q = reinterpret_cast<__nv_bfloat16*>(q_out);
  const auto* cs = reinterpret_cast<const float2*>(rot);
  if (head_dim % 8 == 0) {
    RopeKvVecKernel<<<rows, 128, 0, stream>>>(in, positions, row_seq, cs, kv, layer, n_heads, n_kv_heads, head_dim, q);
  } else {
    RopeKvKernel<<<rows, 256, 0, stream>>>(in, positions, row_seq, cs, kv, layer, n_heads, n_kv_heads, head_dim, q);
  }
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
