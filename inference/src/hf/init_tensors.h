// The tensors of `flotilla model init`'s random checkpoint (hf_init.h): every family's names and
// shapes as transformers saves them, drawn in one fixed order from the options' seed.
#pragma once

#include <cstdint>

#include "flotilla/inference/hf_init.h"
#include "hf/random_tensors.h"

namespace flotilla::inference {

// Whether layer l of the options' model has a dense MLP instead of experts.
bool HfInitDenseLayer(const HfInitOptions& o, int32_t l);

// Draws every tensor of the model (vocab rows) into t. Per layer: the two norms, the attention
// projections, their biases, q/k norms, then the MLP (router, experts, shared experts).
void DrawHfTensors(const HfInitOptions& o, int64_t vocab, RandomTensors& t);

}  // namespace flotilla::inference
