// One sample of a group: the prompt, and every generated token with its logprob, the policy
// version that produced it and its expert routing, accumulated segment by segment across
// checkpoint switches. Routing is appended exactly as the engine emitted it, never recomputed.
//
// A plain value; not thread-safe (the runner owns each sample under its own lock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "flotilla/inference/engine.h"

namespace flotilla::trainer_bridge {

struct RolloutSample {
  uint64_t id = 0;
  uint64_t group = 0;
  std::string dataset;
  std::string task_id;
  uint32_t effort = 0;
  int64_t dispatch_version = 0;

  std::vector<int32_t> prompt;
  std::vector<int32_t> completion;
  std::vector<float> logprobs;        // per completion token
  std::vector<int64_t> versions;      // per completion token
  std::vector<int32_t> routing;       // per completion token: routing_width ids
  uint32_t routing_width = 0;
  uint32_t segments = 0;              // generation calls (1 + resumes after a switch)

  double reward = 0;
  bool failed = false;                // the verifier or the engine failed: reward 0, kept
  std::string detail;

  // Appends tokens from one engine delivery. InvalidArgument when a token's routing width
  // differs from the sample's (a routing row must never be truncated or padded).
  absl::Status Append(const std::vector<inference::TokenRecord>& tokens);
  // The generated tokens' highest and lowest policy versions (0 when none).
  [[nodiscard]] int64_t MinVersion() const;
  [[nodiscard]] int64_t MaxVersion() const;
};

}  // namespace flotilla::trainer_bridge
