#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__global__ void GatherRowsKernel(const uint4* x, const int32_t* src, int vec_per_row, uint4* out) {
  const int i = blockIdx.x;
  const uint4* s = x + static_cast<int64_t>(src[i]) * vec_per_row;
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) out[static_cast<int64_t>(i) * vec_per_row + v] = s[v];
}

__global__ void GatherRowsScalarKernel(const __nv_bfloat16* x, const int32_t* src, int dim, __nv_bfloat16* out) {
  const int i = blockIdx.x;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[static_cast<int64_t>(i) * dim + d] = x[static_cast<int64_t>(src[i]) * dim + d];
}

__global__ void SiluMulKernel(const __nv_bfloat16* gu, int hidden, __nv_bfloat16* h) {
  const int i = blockIdx.x;
  const __nv_bfloat16* g = gu + static_cast<int64_t>(i) * 2 * hidden;
  for (int f = threadIdx.x; f < hidden; f += blockDim.x) {
    const float a = __bfloat162float(g[f]);
    h[static_cast<int64_t>(i) * hidden + f] = __float2bfloat16(a / (1.0f + __expf(-a)) * __bfloat162float(g[hidden + f]));
  }
}

// Eight features per thread (hidden % 8 == 0): 16-byte loads and stores.
__global__ void SiluMulVecKernel(const uint4* gu, int vecs, uint4* h) {
  const int i = blockIdx.x;
  const uint4* g = gu + static_cast<int64_t>(i) * 2 * vecs;
  for (int f = threadIdx.x; f < vecs; f += blockDim.x) {
    const uint4 a = g[f], b = g[vecs + f];
    const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
    const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
    uint4 out;
    __nv_bfloat162* po = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float2 x = __bfloat1622float2(pa[t]), u = __bfloat1622float2(pb[t]);
      po[t] = __floats2bfloat162_rn(x.x / (1.0f + __expf(-x.x)) * u.x, x.y / (1.0f + __expf(-x.y)) * u.y);
    }
    h[static_cast<int64_t>(i) * vecs + f] = out;
  }
}

__global__ void CombineKernel(const __nv_bfloat16* y, const int32_t* inv, const float* weights, int top_k,
                              int dim, float* x) {
  const int r = blockIdx.x;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float acc = 0;
    for (int k = 0; k < top_k; ++k) {
      acc += weights[r * top_k + k] * __bfloat162float(y[static_cast<int64_t>(inv[r * top_k + k]) * dim + d]);
    }
    x[static_cast<int64_t>(r) * dim + d] += acc;
  }
}

// Adds row r's weighted expert outputs to eight residual dims (vector v of the row, two float4)
// and returns their sum of squares.
__device__ __forceinline__ float CombineEight(const uint4* y, const int32_t* inv, const float* weights, int top_k,
                                              int vec_per_row, int r, int v, float4* x) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < top_k; ++k) {
    const float w = weights[r * top_k + k];
    const uint4 u = y[static_cast<int64_t>(inv[r * top_k + k]) * vec_per_row + v];
    const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float2 f = __bfloat1622float2(b[t]);
      acc[2 * t] += w * f.x;
      acc[2 * t + 1] += w * f.y;
    }
  }
  float4* xr = x + (static_cast<int64_t>(r) * vec_per_row + v) * 2;
  float4 a = xr[0], c = xr[1];
  a.x += acc[0];
  a.y += acc[1];
  a.z += acc[2];
  a.w += acc[3];
  c.x += acc[4];
  c.y += acc[5];
  c.z += acc[6];
  c.w += acc[7];
  xr[0] = a;
  xr[1] = c;
  return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + c.x * c.x + c.y * c.y + c.z * c.z + c.w * c.w;
}

// Eight dims per thread: one 16-byte load of each chosen expert's output row, two 16-byte
// read-modify-writes of the residual row.
__global__ void CombineVecKernel(const uint4* y, const int32_t* inv, const float* weights, int top_k,
                                 int vec_per_row, float4* x) {
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) {
    CombineEight(y, inv, weights, top_k, vec_per_row, blockIdx.x, v, x);
  }
}

// CombineVecKernel followed by the next RMS norm of the updated row: xn[r] = bf16(x[r] *
// rsqrt(mean(x[r]^2) + eps) * norm_w), as RmsNormVecKernel (blockDim.x a multiple of 32).
__global__ void CombineNormVecKernel(const uint4* y, const int32_t* inv, const float* weights, int top_k,
                                     int vec_per_row, float4* x, const float4* norm_w, float eps, uint2* xn) {
  __shared__ float partial[32];
  const int r = blockIdx.x;
  float ss = 0;
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) {
    ss += CombineEight(y, inv, weights, top_k, vec_per_row, r, v, x);
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += partial[w];
  const float scale = rsqrtf(total / (8 * vec_per_row) + eps);
  const float4* xr = x + static_cast<int64_t>(r) * vec_per_row * 2;
  uint2* yr = xn + static_cast<int64_t>(r) * vec_per_row * 2;
  // Each thread reads back the residual vectors it wrote above.
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 a = xr[2 * v + h], g = norm_w[2 * v + h];
      const __nv_bfloat162 lo = __floats2bfloat162_rn(a.x * scale * g.x, a.y * scale * g.y);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(a.z * scale * g.z, a.w * scale * g.w);
      uint2 out;
      out.x = *reinterpret_cast<const uint32_t*>(&lo);
      out.y = *reinterpret_cast<const uint32_t*>(&hi);
      yr[2 * v + h] = out;
    }
  }
}

}  // namespace

cudaError_t LaunchGatherRows(const uint16_t* x, const int32_t* src, int n, int dim, uint16_t* out,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dim % 8 == 0) {
    GatherRowsKernel<<<n, 128, 0, stream>>>(reinterpret_cast<const uint4*>(x), src, dim / 8,
                                            reinterpret_cast<uint4*>(out));
  } else {
    GatherRowsScalarKernel<<<n, 128, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x), src, dim,
                                                  reinterpret_cast<__nv_bfloat16*>(out));
  }
  return cudaGetLastError();
}

cudaError_t LaunchSiluMul(const uint16_t* gu, int n, int hidden, uint16_t* h, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (hidden % 8 == 0) {
    const int vecs = hidden / 8;
    SiluMulVecKernel<<<n, vecs >= 256 ? 256 : 64, 0, stream>>>(reinterpret_cast<const uint4*>(gu), vecs,
                                                               reinterpret_cast<uint4*>(h));
  } else {
    SiluMulKernel<<<n, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(gu), hidden,
                                         reinterpret_cast<__nv_bfloat16*>(h));
  }
  return cudaGetLastError();
}

cudaError_t LaunchCombine(const uint16_t* y, const int32_t* inv, const float* weights, int rows,
                          int top_k, int dim, float* x, const float* norm_w, float eps, uint16_t* xn,
                          cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (dim % 8 == 0 && norm_w != nullptr) {
    CombineNormVecKernel<<<rows, 256, 0, stream>>>(reinterpret_cast<const uint4*>(y), inv, weights, top_k, dim / 8,
                                                   reinterpret_cast<float4*>(x), reinterpret_cast<const float4*>(norm_w),
                                                   eps, reinterpret_cast<uint2*>(xn));
    return cudaGetLastError();
  }
  if (dim % 8 == 0) {
    CombineVecKernel<<<rows, 128, 0, stream>>>(reinterpret_cast<const uint4*>(y), inv, weights, top_k, dim / 8,
                                               reinterpret_cast<float4*>(x));
  } else {
    CombineKernel<<<rows, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(y), inv, weights, top_k, dim, x);
  }
  if (norm_w != nullptr) {
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return LaunchRmsNorm(x, norm_w, nullptr, xn, rows, dim, eps, stream);
  }
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
