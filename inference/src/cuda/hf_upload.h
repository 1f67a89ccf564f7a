// A Hugging Face checkpoint folder's tensors straight to the CUDA backend's device buffers: the
// memory-mapped bf16 or f32 bytes converted on the host's threads into the pinned staging
// buffer (other dtypes widened through HfCheckpoint::Read first), with no f32 copy of the
// model. Both expert layouts (per expert `experts.N.gate_proj/up_proj/down_proj`, and
// transformers 5's fused `experts.gate_up_proj` [E, 2I, H] / `experts.down_proj` [E, H, I])
// land in the backend's [E, 2I, H] / [E, H, I], as do Mixtral's `block_sparse_moe.experts.N.w1/w3/w2`.
// Biases and norm weights stay f32; DeepSeek-V3's kv_a_proj_with_mqa is split into its latent
// and key-rotation rows and its o_proj padded per head to the key width. Errors name the tensor
// and the file.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "cuda/upload.h"
#include "flotilla/inference/hf_config.h"

namespace flotilla::inference {
class HfCheckpoint;
}

namespace flotilla::inference::cuda {

// OK when the CUDA backend computes `c`'s family with its full semantics (llama, qwen3,
// qwen3_moe, qwen2_moe, mixtral, olmoe, deepseek_v3: q/k norms per head or over the projection,
// q/k/v/o biases, dense layers, both routers, shared experts with or without qwen2_moe's gate,
// latent attention, every RoPE type); otherwise what is missing, naming config.json's field
// (latent attention with attention_bias, key heads over the attention kernels' 128 values).
absl::Status HfCudaSupports(const HfConfig& c);

absl::Status UploadHfWeights(const HfConfig& c, const HfCheckpoint& ckpt, DeviceWeights* dw, PinnedBuffer* staging,
                             cudaStream_t stream);

}  // namespace flotilla::inference::cuda
