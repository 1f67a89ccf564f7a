#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__device__ __forceinline__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Box-Muller over two hashed uniforms: deterministic in (seed, index).
__device__ __forceinline__ float Normal(uint64_t seed, int64_t i) {
  const uint64_t a = Mix(seed * 0x9E3779B97F4A7C15ull + 2 * static_cast<uint64_t>(i) + 1);
  const uint64_t b = Mix(a + 0x632BE59BD9B4E019ull);
  const float u1 = (static_cast<float>(a >> 40) + 1.0f) / 16777217.0f;
  const float u2 = static_cast<float>(b >> 40) / 16777216.0f;
  return sqrtf(-2.0f * __logf(u1)) * __cosf(6.2831853f * u2);
}

__global__ void RandomBf16Kernel(__nv_bfloat16* out, int64_t n, uint64_t seed, float mean, float stddev) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(mean + stddev * Normal(seed, i));
  }
}

__global__ void RandomF32Kernel(float* out, int64_t n, uint64_t seed, float mean, float stddev) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = mean + stddev * Normal(seed, i);
  }
}

}  // namespace

cudaError_t LaunchRandomBf16(uint16_t* out, int64_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  RandomBf16Kernel<<<1024, 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), n, seed, mean, stddev);
  return cudaGetLastError();
}

cudaError_t LaunchRandomF32(float* out, int64_t n, uint64_t seed, float mean, float stddev,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  RandomF32Kernel<<<256, 256, 0, stream>>>(out, n, seed, mean, stddev);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
