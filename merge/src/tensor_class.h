// Which class a tensor belongs to and which layer it sits in, from its name alone, for both
// Flotilla's names (layers.N.attn.wq, moe.router, moe.experts.w1, moe.shared.w1, attn_norm,
// embed.weight) and Hugging Face's (model.layers.N.self_attn.*, mlp.gate.weight and
// mlp.gate.e_score_correction_bias, mlp.experts.N.* or the fused mlp.experts.gate_up_proj /
// down_proj, mlp.shared_expert(s).*, mlp.shared_expert_gate, *norm*, embed_tokens, lm_head).
#pragma once

#include <string>

#include "flotilla/merge/merge_config.h"

namespace flotilla::merge {

struct TensorPlace {
  TensorClass cls = TensorClass::kOther;
  int layer = -1;       // -1: outside the layers
  bool at_end = false;  // outside the layers, after them (final norm, lm_head)
  // A stacked expert tensor ([experts, ...]): merged one expert's slice at a time.
  bool per_expert_slices = false;
};

// `rank` is the tensor's number of dimensions (a stacked expert tensor has 3).
TensorPlace ClassifyTensor(const std::string& name, size_t rank);

}  // namespace flotilla::merge
