// Weight uploads of the CUDA backend: host tensors (f32 vectors, or the f32 / bf16 bytes of a
// memory-mapped safetensors file) converted to the device's bf16 (matrices) or f32 (norms) on
// several threads, through a reused pinned staging buffer, on a given stream. And the device
// buffers one set of weights fills (both model formats: Flotilla's and the Hugging Face
// families').
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "cuda/device_buffer.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::inference::cuda {

struct DeviceLayer {
  DeviceBuffer attn_norm, ffn_norm;  // f32
  DeviceBuffer q_norm, k_norm;       // f32 [head_dim] (OLMoE: [H hd], [KVH hd]): a Hugging Face
                                     // family's q/k RMSNorm, or empty
  DeviceBuffer wqkv;                 // [(H + 2 KVH) hd, D]
  DeviceBuffer bqkv;                 // f32 [(H + 2 KVH) hd]: q/k/v biases, or empty
  DeviceBuffer wo;                   // [D, H hd]
  DeviceBuffer bo;                   // f32 [D]: o_proj's bias, or empty
  DeviceBuffer router;               // [E, D]; empty in a dense layer
  DeviceBuffer w13;                  // [E, 2F, D]: w1 (gate) rows then w3 (up) rows
  DeviceBuffer w2;                   // [E, D, F]
  DeviceBuffer s13, s2;              // shared experts (same layout), or a dense layer's MLP
  DeviceBuffer shared_gate;          // [1, D]: qwen2_moe's sigmoid gate on the shared expert, or empty
  // DeepSeek-V3's latent attention (wqkv then holds q_b_proj or q_proj, wo o_proj with zero
  // columns padding each head's v to the key width) and router bias.
  DeviceBuffer q_a, q_a_norm;        // [q_lora_rank, D], f32 [q_lora_rank]; empty without q_lora
  DeviceBuffer kv_a, kv_a_norm;      // [kv_lora_rank, D] (kv_a_proj_with_mqa's latent rows), f32
  DeviceBuffer kv_pe;                // [rope, D]: its rows of the shared key rotation
  DeviceBuffer kv_b;                 // [H (nope + v), kv_lora_rank]
  // f32 biases of q_a_proj ([q_lora_rank]) and of kv_a_proj_with_mqa's latent ([kv_lora_rank]) and
  // rotation rows ([rope]) when config.json's attention_bias is true (o_proj's is bo); else empty.
  DeviceBuffer q_a_bias, kv_a_bias, kv_pe_bias;
  DeviceBuffer score_bias;           // f32 [E]: e_score_correction_bias
};

struct DeviceWeights {
  DeviceBuffer embed, head;  // bf16 [V, D]
  DeviceBuffer norm;         // f32
  std::vector<DeviceLayer> layers;
  bool tied = false;
};

// One source tensor of an upload: f32, or the raw f32 or bf16 bytes of a safetensors file (not
// necessarily aligned).
struct Part {
  const uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  size_t size = 0;  // elements
};

inline Part PartOf(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), DType::kF32, v.size()};
}

// Uploads, as bf16, the interleaving p0[0:c0] p1[0:c1] p0[c0:2c0] p1[c1:2c1] ... of `parts`
// with chunk sizes `chunk` (how w1 and w3 are fused into one matrix; with each chunk the whole
// part, the parts one after another).
absl::Status UploadBf16(DeviceBuffer* dst, const std::vector<Part>& parts, const std::vector<size_t>& chunk,
                        PinnedBuffer* staging, cudaStream_t stream);
inline absl::Status UploadOne(DeviceBuffer* dst, const Part& p, PinnedBuffer* staging, cudaStream_t stream) {
  return UploadBf16(dst, {p}, {p.size}, staging, stream);
}
// Norm weights stay f32 on the device.
absl::Status UploadF32(DeviceBuffer* dst, const Part& p, cudaStream_t stream);

}  // namespace flotilla::inference::cuda
