// The shared expert's activation with qwen2_moe's gate: h[i, f] = bf16(silu(gu[i, f]) *
// gu[i, F + f] * sigmoid(gate[i])) for gu of shape n x 2F. The gate is linear in the down
// projection, so scaling the activation scales the shared expert's output by it. Without a gate
// (DeepSeek-V3's shared experts), the plain SwiGLU of LaunchSiluMul.
#include <cuda_bf16.h>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

__global__ void SiluMulGateKernel(const __nv_bfloat16* gu, int hidden, const float* gate, __nv_bfloat16* h) {
  const int i = blockIdx.x;
  const __nv_bfloat16* g = gu + static_cast<int64_t>(i) * 2 * hidden;
  const float s = 1.0f / (1.0f + expf(-gate[i]));
  for (int f = threadIdx.x; f < hidden; f += blockDim.x) {
    const float a = __bfloat162float(g[f]);
    h[static_cast<int64_t>(i) * hidden + f] = __float2bfloat16(a / (1.0f + expf(-a)) * __bfloat162float(g[hidden + f]) * s);
  }
}

}  // namespace

cudaError_t LaunchSiluMulGate(const uint16_t* gu, int n, int hidden, const float* gate, uint16_t* h,
                              cudaStream_t stream) {
  if (gate == nullptr) return LaunchSiluMul(gu, n, hidden, h, stream);
  if (n == 0) return cudaSuccess;
  SiluMulGateKernel<<<n, 256, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(gu), hidden, gate,
                                           reinterpret_cast<__nv_bfloat16*>(h));
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
