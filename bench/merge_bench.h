// The merge's memory bound: synthetic checkpoints (a base and two fine-tuned models in Hugging
// Face names, fused MoE experts included) are written, then merged in a child process whose peak
// resident memory (getrusage's ru_maxrss via wait4) is the measure: streaming should hold it
// near a few tensors whatever the checkpoints' size.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace flotilla::bench {

struct MergeBenchOptions {
  std::string dir;               // scratch folder: checkpoints and output (removed after)
  uint64_t bytes_each = 2ull << 30;  // at least this much f32 weight per checkpoint
  std::string method = "ties";   // any merge method; linear merges the two models without the base
};

struct MergeBenchResult {
  uint64_t bytes_each = 0;        // actual size of each checkpoint's weights
  int layers = 0;
  uint64_t largest_tensor_bytes = 0;
  uint64_t peak_rss_bytes = 0;    // the merging child's
  double merge_seconds = 0;
  uint64_t output_bytes = 0;
};

absl::StatusOr<MergeBenchResult> RunMergeMemoryBench(const MergeBenchOptions& options);

}  // namespace flotilla::bench
