// Token sampling from one row of logits: temperature, top-p, and a per-sequence counter-based
// RNG, so a sequence's draws depend only on its seed and how many tokens it has drawn, never
// on what else shares its batch. Logprobs are of the model's own distribution
// (log_softmax of the raw logits), whatever the temperature.
#pragma once

#include <cstdint>
#include <vector>

#include "flotilla/inference/engine.h"

namespace flotilla::inference {

class SequenceRng {
 public:
  explicit SequenceRng(uint64_t seed = 0) : state_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  // Uniform in [0, 1).
  double Next();
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

// log_softmax of `logits` (n values) into `out`.
void LogSoftmax(const float* logits, int n, std::vector<float>* out);

// Picks a token and fills rec->token, rec->logprob and the top-k lists.
void SampleToken(const float* logits, int vocab, const SamplingParams& p, SequenceRng* rng,
                 TokenRecord* rec);

// The k largest entries of `logprobs` (descending; ties: lower id first).
void TopK(const std::vector<float>& logprobs, uint32_t k, std::vector<int32_t>* ids,
          std::vector<float>* values);

}  // namespace flotilla::inference
