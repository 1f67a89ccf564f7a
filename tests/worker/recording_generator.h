// Wraps a real TokenGenerator and keeps every call and everything it returned, so a test can
// compare the worker's stored record with what the engine actually produced.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/worker/token_generator.h"

namespace flotilla::worker::testing {

struct RecordedCall {
  GenerationCall call;
  GenerationOutcome outcome;
};

class RecordingGenerator : public TokenGenerator {
 public:
  explicit RecordingGenerator(TokenGenerator* inner) : inner_(inner) {}
  absl::StatusOr<GenerationOutcome> Generate(const GenerationCall& call,
                                             const TokensCallback& on_tokens) override {
    auto out = inner_->Generate(call, on_tokens);
    if (out.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back({call, *out});
    }
    return out;
  }
  void Release(const std::string& id) override { inner_->Release(id); }
  int32_t ContextLimit() const override { return inner_->ContextLimit(); }
  std::string ModelName() const override { return inner_->ModelName(); }
  // Calls grouped by engine sequence, each group in call order.
  std::vector<std::vector<RecordedCall>> Groups() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::vector<RecordedCall>> groups;
    std::map<std::string, size_t> index;
    for (const auto& c : calls_) {
      auto [it, inserted] = index.emplace(c.outcome.sequence_id, groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(c);
    }
    return groups;
  }
  // Every successful call whose sequence is `sequence_id`, in order.
  std::vector<RecordedCall> CallsFor(const std::string& sequence_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<RecordedCall> out;
    for (const auto& c : calls_) {
      if (c.outcome.sequence_id == sequence_id) out.push_back(c);
    }
    return out;
  }

 private:
  TokenGenerator* inner_;
  mutable std::mutex mu_;
  std::vector<RecordedCall> calls_;
};

}  // namespace flotilla::worker::testing
