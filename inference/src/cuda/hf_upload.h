// A Hugging Face checkpoint folder's tensors straight to the CUDA backend's device buffers: the
// memory-mapped bf16 or f32 bytes converted on the host's threads into the pinned staging
// buffer (other dtypes widened through HfCheckpoint::Read first), with no f32 copy of the
// model. Both expert layouts (per expert `experts.N.gate_proj/up_proj/down_proj`, and
// transformers 5's fused `experts.gate_up_proj` [E, 2I, H] / `experts.down_proj` [E, H, I])
// land in the backend's [E, 2I, H] / [E, H, I]. Errors name the tensor and the file.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "cuda/upload.h"
#include "flotilla/inference/hf_config.h"

namespace flotilla::inference {
class HfCheckpoint;
}

namespace flotilla::inference::cuda {

// OK when the CUDA backend computes `c`'s family with its full semantics (qwen3_moe and
// qwen3: q/k RMSNorm, mlp_only_layers / decoder_sparse_step, norm_topk_prob, RoPE without an
// attention factor); otherwise what is missing, naming config.json's field.
absl::Status HfCudaSupports(const HfConfig& c);

absl::Status UploadHfWeights(const HfConfig& c, const HfCheckpoint& ckpt, DeviceWeights* dw, PinnedBuffer* staging,
                             cudaStream_t stream);

}  // namespace flotilla::inference::cuda
