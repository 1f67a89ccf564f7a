#include <cuda_bf16.h>
#include <mma.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

using namespace nvcuda;

constexpr int kWarps = 4;         // each warp owns 16 output columns
constexpr int kRowsPerPass = 64;  // 4 row fragments per warp

// out[rows of expert e, n0:n0+64] = x[rows of e] * w[e, n0:n0+64, :]^T, rows found through
// the device-side offsets (no host round trip). Each block streams its 64 x K weight tile once
// per 64 rows of its expert; x rows past the expert's end are read (the caller pads the buffer)
// but never written.
__global__ void __launch_bounds__(kWarps * 32) MoeGemmKernel(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                              const int32_t* offsets, int N, int K,
                                                              __nv_bfloat16* out) {
  __shared__ float stage[kWarps][16 * 16];
  const int e = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n0 = blockIdx.x * (kWarps * 16) + warp * 16;
  const int begin = offsets[e], count = offsets[e + 1] - begin;
  if (count == 0) return;
  const __nv_bfloat16* we = w + (static_cast<int64_t>(e) * N + n0) * K;
  for (int m0 = 0; m0 < count; m0 += kRowsPerPass) {
    const int tiles = min(4, (count - m0 + 15) / 16);
    const __nv_bfloat16* xa = x + static_cast<int64_t>(begin + m0) * K;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) wmma::fill_fragment(acc[i], 0.0f);
#pragma unroll 4
    for (int k = 0; k < K; k += 16) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
      wmma::load_matrix_sync(b, we + k, K);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (i < tiles) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
          wmma::load_matrix_sync(a, xa + static_cast<int64_t>(i) * 16 * K + k, K);
          wmma::mma_sync(acc[i], a, b, acc[i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (i < tiles) {
        wmma::store_matrix_sync(stage[warp], acc[i], 16, wmma::mem_row_major);
        __syncwarp();
        for (int idx = lane; idx < 256; idx += 32) {
          const int r = m0 + i * 16 + idx / 16;
          if (r < count) out[static_cast<int64_t>(begin + r) * N + n0 + idx % 16] = __float2bfloat16(stage[warp][idx]);
        }
        __syncwarp();
      }
    }
  }
}

}  // namespace

bool MoeGemmSupports(int n, int k) { return n % (kWarps * 16) == 0 && k % 16 == 0; }

cudaError_t LaunchMoeGemm(const uint16_t* x, const uint16_t* w, const int32_t* offsets, int n_experts,
                          int n, int k, uint16_t* out, cudaStream_t stream) {
  if (!MoeGemmSupports(n, k)) return cudaErrorInvalidValue;
  dim3 grid(n / (kWarps * 16), n_experts);
  MoeGemmKernel<<<grid, kWarps * 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x),
                                                  reinterpret_cast<const __nv_bfloat16*>(w), offsets, n, k,
                                                  reinterpret_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
