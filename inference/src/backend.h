// The seam between the engine's scheduler and the hardware: one ModelBackend per loaded model
// runs a forward step over a batch of rows drawn from many sequences (prefill chunks and
// decode tokens mixed) against a paged KV cache it stores. The engine owns page allocation;
// the backend owns page storage. Not thread-safe: the engine calls it under its step lock,
// except StageWeights, which may run while other calls (Forward included) are in progress; the
// engine never runs two StageWeights, or StageWeights and CommitWeights, at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "flotilla/inference/model_config.h"
#include "weights.h"

namespace flotilla::inference {

class ThreadPool;

// How to sample one logit row on the backend: SampleToken's greedy and full-distribution
// paths (nucleus sampling stays on the host).
struct RowSampling {
  float temperature = 1.0f;   // <= 0: greedy
  uint32_t top_logprobs = 0;
  uint64_t rng_state = 0;     // the row's SequenceRng state before its draw; the caller advances it
};

// Rows of one step. Row r is token tokens[r] at position positions[r] of sequence
// row_seq[r]; that sequence's page table is seq_pages[row_seq[r]] (page i holds positions
// [i*page_tokens, (i+1)*page_tokens)). A step writes each row's K/V into its page before any
// row attends, so a prefill chunk sees itself causally.
struct StepInput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> row_seq;
  std::vector<std::vector<int32_t>> seq_pages;
  std::vector<int32_t> logit_rows;  // rows whose next-token logits are wanted
  // Empty, or rows x (MoE layers) x top_k expert ids the rows must use instead of the router's
  // choice (routing replay), in the layout of StepOutput::experts.
  std::vector<int32_t> replay_experts;
  // Empty, or (only for a backend whose SamplesOnDevice() is true) one entry per logit row: the
  // backend then samples every logit row itself and returns StepOutput::sampled, not logits.
  std::vector<RowSampling> sampling;
};

// What SampleToken would have put in a TokenRecord for that row.
struct SampledRow {
  int32_t token = 0;
  float logprob = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

struct StepOutput {
  std::vector<float> logits;    // logit_rows.size() x vocab_size (empty when sampled)
  std::vector<SampledRow> sampled;  // one per logit row when StepInput::sampling was set
  // rows x n_layers x top_k, the router's choice (descending); a Hugging Face family's backend
  // gives rows x (its MoE layers) x top_k.
  std::vector<int32_t> experts;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual const char* name() const = 0;
  virtual const ModelConfig& config() const = 0;
  // Replaces the weights (same config). Called only between steps.
  virtual absl::Status SetWeights(std::shared_ptr<const ModelWeights> weights) = 0;
  // Prepares `weights` (same config) in a second set of buffers without touching the set in
  // service, replacing anything staged before. On failure nothing stays staged.
  virtual absl::Status StageWeights(std::shared_ptr<const ModelWeights> weights) = 0;
  // Puts the staged set in service (between steps) and returns the set it replaced, for the
  // caller to free outside the step. FAILED_PRECONDITION when nothing is staged.
  virtual absl::StatusOr<std::shared_ptr<const void>> CommitWeights() = 0;
  // Whether StageWeightsFromFile works: a backend that keeps weights in its own format (the
  // GPU's bf16) converts straight from a file OpenCheckedWeights accepted for its config, with
  // no f32 copy on the host. The same contract as StageWeights otherwise.
  virtual bool StagesFromFile() const { return false; }
  virtual absl::Status StageWeightsFromFile(const SafetensorsFile& file) {
    (void)file;
    return absl::UnimplementedError(absl::StrCat(name(), " backend stages only loaded weights"));
  }
  // Deterministic random weights made in place (the benchmark's large models).
  virtual absl::Status SetRandomWeights(uint64_t seed, float stddev) = 0;
  virtual absl::Status Forward(const StepInput& in, StepOutput* out) = 0;
  // Whether Forward takes StepInput::sampling (then it draws what SampleToken would from the
  // same logits and RNG state; the CUDA sampler sums in another order than the host, which can
  // matter only at a rounding boundary: cuda/sample.cu).
  virtual bool SamplesOnDevice() const { return false; }

  virtual uint32_t page_tokens() const = 0;
  virtual uint32_t num_pages() const = 0;
  virtual size_t page_bytes() const = 0;
  // Raw page contents (backend-specific layout) for state save/restore.
  virtual absl::Status ReadPage(int32_t page, uint8_t* dst) = 0;
  virtual absl::Status WritePage(int32_t page, const uint8_t* src) = 0;
  // Copies page `src`'s contents into page `dst` (the prefix cache's copy on write).
  virtual absl::Status CopyPage(int32_t src, int32_t dst) {
    std::vector<uint8_t> buf(page_bytes());
    if (absl::Status s = ReadPage(src, buf.data()); !s.ok()) return s;
    return WritePage(dst, buf.data());
  }
};

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCpuBackend(const ModelConfig& config,
                                                               uint32_t page_tokens,
                                                               uint64_t kv_bytes,
                                                               ThreadPool* pool);
struct HfWeights;
// The CPU backend of a Hugging Face family (hf_config.h), over weights HfWeights::Load made.
// SetWeights and the staging calls take Flotilla's format only and refuse.
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateHfCpuBackend(std::shared_ptr<const HfWeights> weights,
                                                                 uint32_t page_tokens, uint64_t kv_bytes,
                                                                 ThreadPool* pool);
// Defined only in builds with CUDA; otherwise returns UNIMPLEMENTED.
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(const ModelConfig& config,
                                                                uint32_t page_tokens,
                                                                uint64_t kv_bytes);
struct HfConfig;
class HfCheckpoint;
// The engine's summary of a Hugging Face family's config (what ModelBackend::config() returns).
ModelConfig HfModelSummary(const HfConfig& config);
// The CUDA backend of a Hugging Face family (qwen3_moe, qwen3; others are refused naming
// config.json's field), bf16 on the device, the checkpoint's tensors uploaded straight from their
// mapping; without a checkpoint, weights come from SetRandomWeights. StepOutput::experts has
// rows x (MoE layers) x top_k. SetWeights and the staging calls refuse (they take Flotilla's
// format). Defined only in builds with CUDA; otherwise returns UNIMPLEMENTED.
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateHfCudaBackend(const HfConfig& config, const HfCheckpoint* checkpoint,
                                                                  uint32_t page_tokens, uint64_t kv_bytes);

}  // namespace flotilla::inference
