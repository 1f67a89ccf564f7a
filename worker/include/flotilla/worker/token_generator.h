// TokenGenerator: the seam between the worker and the inference engine. The worker asks for
// tokens to be generated after a sequence it keeps growing; the engine implementation keeps
// the sequence's KV state between calls so earlier tokens are never prefilled again.
//
// Thread-safety: implementations are thread-safe; `on_tokens` runs on the calling thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/engine.h"

namespace flotilla::worker {

struct GenerationCall {
  std::string sequence_id;             // empty: start a new sequence
  std::vector<int32_t> new_tokens;     // tokens the sequence does not hold yet
  inference::SamplingParams sampling;
  // Someone watches the tokens as they come (a streaming client): `on_tokens` gets each
  // step's. Otherwise they reach it in batches, when the call ends or every few milliseconds,
  // and the engine's delivery wakes no thread per token.
  bool stream = false;
};

struct GenerationOutcome {
  std::string sequence_id;             // the kept sequence (extend it next time)
  std::vector<inference::TokenRecord> tokens;
  inference::FinishReason finish = inference::FinishReason::kStop;
  uint32_t prefilled_tokens = 0;
  uint32_t resumes = 0;                // interrupted and resumed (GenerationGate) on the way
};

using TokensCallback = std::function<void(const std::vector<inference::TokenRecord>&)>;

class TokenGenerator {
 public:
  virtual ~TokenGenerator() = default;
  // Generates after sequence_id + new_tokens. NotFound when sequence_id is no longer kept
  // (the caller then starts a new sequence with the whole context).
  virtual absl::StatusOr<GenerationOutcome> Generate(const GenerationCall& call,
                                                     const TokensCallback& on_tokens) = 0;
  // Frees a kept sequence; unknown ids are ignored.
  virtual void Release(const std::string& sequence_id) = 0;
  // The model's context window in tokens.
  virtual int32_t ContextLimit() const = 0;
  virtual std::string ModelName() const = 0;
};

class GenerationGate;

// Adapts an inference::Engine (not owned; must outlive the generator) serving `model`
// ("" for the engine's default model). With `gate` (borrowed, nullable; must outlive the
// generator) an interrupted sequence parks at the gate and resumes when it opens, so a weight
// switch or offload is invisible to the caller but for the tokens' policy versions; without
// one, an interrupted sequence ends the call with FinishReason::kInterrupted.
std::unique_ptr<TokenGenerator> NewEngineTokenGenerator(inference::Engine* engine,
                                                        std::string model,
                                                        std::string display_name,
                                                        GenerationGate* gate = nullptr);

}  // namespace flotilla::worker
