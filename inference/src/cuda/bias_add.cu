// Projection biases of the Hugging Face families (llama's and olmoe's attention_bias, qwen2_moe's
// q/k/v biases): a bias vector (f32) added to every row of a product's output, bf16 (the fused
// q/k/v rows, before any q/k norm and RoPE) or f32 (o_proj's output in the residual stream).
#include <cuda_bf16.h>

#include <algorithm>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void BiasAddBf16Kernel(__nv_bfloat16* y, const float* b, int64_t total, int cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16(__bfloat162float(y[i]) + b[i % cols]);
  }
}

__global__ void BiasAddF32Kernel(float* y, const float* b, int64_t total, int cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += b[i % cols];
  }
}

int Blocks(int64_t total) { return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 4096)); }

}  // namespace

cudaError_t LaunchBiasAdd(uint16_t* y, const float* b, int rows, int cols, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  BiasAddBf16Kernel<<<Blocks(total), kThreads, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(y), b, total, cols);
  return cudaGetLastError();
}

cudaError_t LaunchBiasAddF32(float* y, const float* b, int rows, int cols, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  BiasAddF32Kernel<<<Blocks(total), kThreads, 0, stream>>>(y, b, total, cols);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
