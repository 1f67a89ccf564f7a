// A deterministic TokenGenerator for unit tests of the HTTP layer and bookkeeping: replies
// come from a script, and each token's logprob, policy version and routing are a fixed
// function of its position, so tests can assert exact values. It keeps each sequence's full
// token list the way the engine keeps KV state, so tests can check that the worker extended
// one sequence instead of prefilling it again. Integration tests use the real engine.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/worker/token_generator.h"

namespace flotilla::worker::testing {

class ScriptedGenerator : public TokenGenerator {
 public:
  static constexpr int kWidth = 4;  // routing entries per token

  void AddReply(std::vector<int32_t> tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    script_.push_back(std::move(tokens));
  }
  void AddTextReply(const std::string& text) {
    std::vector<int32_t> t = inference::Encode(text);
    t.push_back(inference::kEndTurn);
    AddReply(std::move(t));
  }

  absl::StatusOr<GenerationOutcome> Generate(const GenerationCall& call,
                                             const TokensCallback& on_tokens) override {
    std::vector<inference::TokenRecord> records;
    GenerationOutcome out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(call);
      std::string id = call.sequence_id;
      if (id.empty()) {
        id = absl::StrCat("seq-", next_++);
        sequences_[id];
      } else if (!sequences_.count(id)) {
        return absl::NotFoundError(absl::StrCat("sequence ", id, " not found"));
      }
      std::vector<int32_t>& seq = sequences_[id];
      seq.insert(seq.end(), call.new_tokens.begin(), call.new_tokens.end());
      std::vector<int32_t> reply = script_.empty() ? std::vector<int32_t>{inference::kEndTurn}
                                                   : script_.front();
      if (!script_.empty()) script_.pop_front();
      if (reply.size() > call.sampling.max_new_tokens) reply.resize(call.sampling.max_new_tokens);
      for (int32_t tok : reply) {
        records.push_back(RecordFor(seq.size(), tok));
        seq.push_back(tok);
      }
      out.sequence_id = id;
      out.prefilled_tokens = static_cast<uint32_t>(call.new_tokens.size());
      out.finish = !reply.empty() && reply.back() == inference::kEndTurn
                       ? inference::FinishReason::kStop
                       : inference::FinishReason::kLength;
    }
    // Delivered in two parts, like an engine's successive steps.
    size_t half = records.size() / 2;
    if (on_tokens && half > 0) on_tokens({records.begin(), records.begin() + half});
    if (on_tokens && half < records.size()) on_tokens({records.begin() + half, records.end()});
    out.tokens = std::move(records);
    return out;
  }

  static inference::TokenRecord RecordFor(size_t position, int32_t token) {
    inference::TokenRecord r;
    r.token = token;
    r.logprob = -0.001f * static_cast<float>(position % 997) - 0.5f;
    r.policy_version = 7;
    for (int k = 0; k < kWidth; ++k) r.experts.push_back(static_cast<int32_t>((position + k) % 8));
    r.top_ids = {token, (token + 1) % 256};
    r.top_logprobs = {r.logprob, r.logprob - 1.0f};
    return r;
  }

  void Release(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    sequences_.erase(id);
  }
  void DropAllSequences() {
    std::lock_guard<std::mutex> lock(mu_);
    sequences_.clear();
  }
  int32_t ContextLimit() const override { return context_limit_; }
  void set_context_limit(int32_t n) { context_limit_ = n; }
  std::string ModelName() const override { return "scripted"; }

  std::vector<GenerationCall> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<int32_t> sequence(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sequences_.find(id);
    return it == sequences_.end() ? std::vector<int32_t>() : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::vector<int32_t>> script_;
  std::map<std::string, std::vector<int32_t>> sequences_;
  std::vector<GenerationCall> calls_;
  int next_ = 0;
  int32_t context_limit_ = 4096;
};

}  // namespace flotilla::worker::testing
