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

// One block per row; threads walk (head, i) pairs of q and k heads, then v.
__global__ void RopeKvKernel(const __nv_bfloat16* qkv, const int32_t* positions, const int32_t* row_seq,
                             const double* inv_freq, KvGeometry kv, int layer, int n_heads,
                             int n_kv_heads, int head_dim, __nv_bfloat16* q_out) {
  const int r = blockIdx.x;
  const int pos = positions[r];
  const int seq = row_seq[r];
  const int half = head_dim / 2;
  const int width = (n_heads + 2 * n_kv_heads) * head_dim;
  const __nv_bfloat16* row = qkv + static_cast<int64_t>(r) * width;
  __nv_bfloat16* k_dst = KvSlot(kv, seq, pos, layer, 0);
  __nv_bfloat16* v_dst = KvSlot(kv, seq, pos, layer, 1);
  // The rotation of each frequency, computed once per row (in double, as the CPU backend does)
  // and shared by every head.
  __shared__ float cos_of[64], sin_of[64];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(static_cast<double>(pos) * inv_freq[i], &s, &c);
    cos_of[i] = static_cast<float>(c);
    sin_of[i] = static_cast<float>(s);
  }
  __syncthreads();
  const int pairs = (n_heads + n_kv_heads) * half;
  for (int t = threadIdx.x; t < pairs; t += blockDim.x) {
    const int head = t / half, i = t % half;
    const float cs = cos_of[i], sn = sin_of[i];
    const __nv_bfloat16* src = row + head * head_dim;
    const float x1 = __bfloat162float(src[i]), x2 = __bfloat162float(src[i + half]);
    const float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
    if (head < n_heads) {
      __nv_bfloat16* dst = q_out + static_cast<int64_t>(r) * n_heads * head_dim + head * head_dim;
      dst[i] = __float2bfloat16(y1);
      dst[i + half] = __float2bfloat16(y2);
    } else {
      __nv_bfloat16* dst = k_dst + (head - n_heads) * head_dim;
      dst[i] = __float2bfloat16(y1);
      dst[i + half] = __float2bfloat16(y2);
    }
  }
  const __nv_bfloat16* v = row + (n_heads + n_kv_heads) * head_dim;
  for (int t = threadIdx.x; t < n_kv_heads * head_dim; t += blockDim.x) v_dst[t] = v[t];
}

}  // namespace

cudaError_t LaunchRopeKvWrite(const uint16_t* qkv, const int32_t* positions, const int32_t* row_seq,
                              const double* inv_freq, KvGeometry kv, int layer, int rows,
                              int n_heads, int n_kv_heads, int head_dim, uint16_t* q_out,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (head_dim > 128) return cudaErrorInvalidValue;  // the per-row rotation table holds 64
  RopeKvKernel<<<rows, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(qkv), positions, row_seq, inv_freq, kv, layer, n_heads,
                                         n_kv_heads, head_dim, reinterpret_cast<__nv_bfloat16*>(q_out));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
