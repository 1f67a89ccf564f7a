// The embedded inference engine: a small decoder-only MoE transformer with a paged KV cache,
// continuous batching, token-level interrupt/resume, weight hot-swap and scoring.
//
// Thread-safety: every method is thread-safe. One scheduler thread owns the model weights and
// KV cache and runs steps; callers submit requests and receive tokens through sinks called
// from that thread, or with overlap_delivery from the engine's delivery thread, one call at a
// time and in order for each sequence (a sink must not block for long and must not call back
// into the engine synchronously except Interrupt).
//
// Ownership: the engine owns every sequence's state until Release(), which frees it at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/metrics.h"
#include "flotilla/inference/model_config.h"

namespace flotilla::inference {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  uint64_t seed = 0;
  uint32_t max_new_tokens = 256;
  std::vector<int32_t> stop_tokens;  // default (empty): {kEndTurn, kEos}
  uint32_t top_logprobs = 0;
};

// What the trainer needs to see about one generated token, exactly. `logprob` and the top
// lists are of the model's own distribution (log_softmax of the raw logits, temperature 1).
// `experts` is the routing of the forward pass whose logits produced this token (the pass over
// the previous position), and `policy_version` the version of the weights that ran it.
struct TokenRecord {
  int32_t token = 0;
  float logprob = 0;
  int64_t policy_version = 0;
  std::vector<int32_t> experts;  // n_moe_layers x top_k, row-major
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

enum class FinishReason { kRunning, kStop, kLength, kInterrupted, kCancelled, kError };

// One delivery to a sink: the tokens produced since the last delivery, and whether the
// sequence has stopped (finish != kRunning ends this Generate/Resume call).
struct GenerateUpdate {
  std::string sequence_id;
  std::vector<TokenRecord> tokens;
  FinishReason finish = FinishReason::kRunning;
  uint32_t prefilled_tokens = 0;  // tokens run through prefill for this call (0 on Resume; cache hits excluded)
  std::string error;
};
// A sink owns each update it is given (it may keep it without a copy).
using TokenSink = std::function<void(GenerateUpdate&&)>;

struct GenerateRequest {
  std::string model;                 // empty: the default model
  std::string sequence_id;           // empty: a new sequence; else extend a kept one
  std::vector<int32_t> prompt;       // for an extension: only the new tokens
  SamplingParams sampling;
  bool keep_state = false;           // keep KV after finishing (extend/save later)
};

// A whole generation, collected (the blocking convenience over the sink API).
struct GenerateResult {
  std::string sequence_id;
  std::vector<TokenRecord> tokens;
  FinishReason finish = FinishReason::kStop;
  uint32_t prefilled_tokens = 0;
};

struct ScoreResult {
  std::vector<float> logprobs;       // logprob of tokens[i] given tokens[<i], for i in [start, n)
  std::vector<int32_t> top_ids;      // (n - start) x top_k
  std::vector<float> top_logprobs;
  std::vector<float> full_logprobs;  // (n - start) x vocab, when asked
};

struct EngineStats {
  uint64_t prefill_tokens = 0;       // every token ever run through prefill
  uint64_t decode_tokens = 0;
  uint64_t interrupts = 0;           // sequences stopped by Interrupt/InterruptAll
  uint32_t active_sequences = 0;
  uint32_t kv_pages_used = 0;        // pages a sequence references
  uint32_t kv_pages_total = 0;
  uint32_t kv_pages_cached = 0;      // pages kept only for the prefix cache (evictable)
  uint64_t steps = 0;
  uint64_t prefix_cached_tokens = 0; // prompt tokens whose K/V came from the prefix cache
};

struct EngineOptions {
  std::string backend = "cpu";       // "cpu" or "cuda"
  int threads = 0;                   // CPU threads; 0: hardware concurrency
  uint32_t kv_page_tokens = 16;
  uint64_t kv_memory_bytes = 512ull << 20;
  uint32_t max_batch = 64;
  std::string state_dir;             // file tier for SaveState; empty: a temp dir
  uint32_t max_step_tokens = 2048;   // rows per step (prefill is chunked to fit)
  // Prompt rows of one sequence per step while other sequences run (0: up to max_step_tokens),
  // so a long prompt's prefill does not stall their decoding.
  uint32_t prefill_chunk_tokens = 512;
  // Whether a new sequence reuses the K/V pages of a prompt prefix another sequence (kept,
  // finished or released) computed under the same weights: blocks shared by content,
  // copy-on-write at the block where prompts diverge, evicted least recently used.
  bool prefix_cache = true;
  const Clock* clock = nullptr;      // for state TTLs; null: the system clock
  // Whether a step's token records and deliveries of the sequences that go on are made while
  // the next step's forward runs (on a thread of their own) instead of between the two
  // forwards. -1: where the forward runs on an accelerator (cuda); 0: never; 1: always.
  int overlap_delivery = -1;
  // Where the engine's figures go (flotilla_engine_*: tokens, step time, batch size, KV pages,
  // interrupts, weight versions and swap stalls); null: none. Must outlive the engine.
  MetricsRegistry* metrics = nullptr;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  virtual ~Engine() = default;

  // Loads a model from safetensors, checking every tensor's dtype and shape against `config`.
  // Loading an existing name is UpdateWeights. The first model loaded is the default.
  virtual absl::Status LoadModel(const std::string& name, const ModelConfig& config,
                                 const std::string& safetensors_path, int64_t version) = 0;
  // Loads a Hugging Face checkpoint folder (config.json + safetensors, hf_config.h's families)
  // for the CPU backend (f32), or the cuda backend (bf16; every family; what its kernels cannot
  // take is refused as UNIMPLEMENTED naming config.json's field); its context is
  // max_position_embeddings. Such a model takes no weight updates. Token records carry the
  // experts of its MoE layers only (a dense model's records carry none).
  virtual absl::Status LoadHfModel(const std::string& name, const std::string& dir, int64_t version) = 0;
  // Swaps a model's weights between two steps; no sequence loses its state. On a bad file the
  // old weights stay in service and the error says why. StageWeights then CommitWeights.
  virtual absl::Status UpdateWeights(const std::string& name, const std::string& path,
                                     int64_t version) = 0;
  // The slow half of a weight update, while generation continues: reads and checks the file
  // against the model's config and prepares the weights beside the ones in service (on the
  // GPU: converted and uploaded into a second set of buffers). Replaces anything staged before.
  // A bad file is refused (the error says why) and changes nothing; the weights in service are
  // never touched, and a failure while preparing leaves nothing staged.
  virtual absl::Status StageWeights(const std::string& name, const std::string& path,
                                    int64_t version) = 0;
  // The fast half: between two steps, puts the staged weights in service (the old ones are
  // freed after the step lock is released) and returns their version. FAILED_PRECONDITION
  // when nothing is staged.
  virtual absl::StatusOr<int64_t> CommitWeights(const std::string& name) = 0;

  // Starts (or extends) a sequence; tokens flow to `sink` until it finishes or is interrupted.
  virtual absl::StatusOr<std::string> Generate(const GenerateRequest& request, TokenSink sink) = 0;
  // Blocking convenience: runs Generate and waits for its end.
  virtual absl::StatusOr<GenerateResult> GenerateBlocking(const GenerateRequest& request) = 0;

  // Stops a running sequence at the next token boundary and keeps its state; the running
  // call's sink gets finish == kInterrupted. Returns the tokens generated so far.
  virtual absl::StatusOr<uint32_t> Interrupt(const std::string& sequence_id) = 0;
  // Interrupts every running sequence (checkpoint switch); returns their ids.
  virtual std::vector<std::string> InterruptAll() = 0;
  // Continues an interrupted sequence from its kept KV: no prefill of earlier tokens.
  virtual absl::Status Resume(const std::string& sequence_id, const SamplingParams& sampling,
                              TokenSink sink) = 0;

  // Moves a kept sequence's whole state (KV, tokens, routing, versions) out of the KV cache to
  // host memory or a file, with a TTL; returns a handle. LoadState brings it back.
  virtual absl::StatusOr<std::string> SaveState(const std::string& sequence_id, bool to_file,
                                                uint32_t ttl_ms) = 0;
  virtual absl::StatusOr<std::string> LoadState(const std::string& handle) = 0;
  // Frees a sequence (or saved state) now. Returns bytes freed.
  virtual absl::StatusOr<uint64_t> Release(const std::string& sequence_id) = 0;

  // Prefill only: per-position logprobs of the given tokens (and top-k / full vocabulary).
  virtual absl::StatusOr<ScoreResult> Score(const std::string& model,
                                            const std::vector<int32_t>& tokens, uint32_t start,
                                            uint32_t top_k, bool full_vocab) = 0;

  virtual absl::StatusOr<int64_t> PolicyVersion(const std::string& model) const = 0;
  virtual absl::StatusOr<ModelConfig> Config(const std::string& model) const = 0;
  virtual EngineStats Stats() const = 0;
  // Names of the loaded models, the default first.
  virtual std::vector<std::string> ModelNames() const { return {}; }
};

}  // namespace flotilla::inference
