// Whether a parent can be merged with the base: the same architecture (shape-relevant
// config.json fields, tensor names and shapes) and the same vocabulary (embedding shapes,
// tokenizer files byte for byte). A refusal is FailedPrecondition naming the model and the
// field, tensor or file that differs.
#pragma once

#include "absl/status/status.h"
#include "checkpoint.h"

namespace flotilla::merge {

absl::Status CheckCompatible(const Checkpoint& base, const Checkpoint& model);

}  // namespace flotilla::merge
