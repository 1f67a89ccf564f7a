// Checks a stored trajectory segment token by token against what the engine returned: the
// segment's ids are exactly one engine sequence, fed incrementally (every call extended the
// same sequence, none prefilled an earlier token again); every model-generated token has loss
// mask 1 and the engine's logprob, policy version and routing; every other token has mask 0;
// and scoring the whole sequence in one pass gives the recorded logprobs.
#pragma once

#include <cmath>
#include <vector>

#include "flotilla/inference/engine.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/proto/trajectory.pb.h"
#include "gtest/gtest.h"
#include "recording_generator.h"

namespace flotilla::worker::testing {

struct FlatSegment {
  std::vector<int32_t> ids;
  std::vector<uint32_t> mask;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  std::vector<int32_t> experts;
};

inline FlatSegment Flatten(const v1::Segment& seg) {
  FlatSegment f;
  for (const auto& t : seg.turns()) {
    const auto& s = t.tokens();
    f.ids.insert(f.ids.end(), s.ids().begin(), s.ids().end());
    f.mask.insert(f.mask.end(), s.loss_mask().begin(), s.loss_mask().end());
    f.logprobs.insert(f.logprobs.end(), s.logprobs().begin(), s.logprobs().end());
    f.versions.insert(f.versions.end(), s.policy_versions().begin(), s.policy_versions().end());
    f.experts.insert(f.experts.end(), s.experts().begin(), s.experts().end());
  }
  return f;
}

// Returns the number of generated tokens checked.
inline size_t ExpectSegmentIsOneEngineSequence(const v1::Segment& seg, const RecordingGenerator& rec,
                                               inference::Engine& engine, int width) {
  FlatSegment f = Flatten(seg);
  EXPECT_EQ(f.mask.size(), f.ids.size());
  EXPECT_EQ(f.logprobs.size(), f.ids.size());
  EXPECT_EQ(f.versions.size(), f.ids.size());
  // Find the engine sequence whose fed and generated tokens are this segment.
  std::vector<int32_t> fed;
  std::vector<int> generated_flag;
  std::vector<const inference::TokenRecord*> records;
  bool found = false;
  const auto groups = rec.Groups();
  for (const auto& group : groups) {
    fed.clear();
    generated_flag.clear();
    records.clear();
    for (size_t i = 0; i < group.size(); ++i) {
      for (int32_t t : group[i].call.new_tokens) {
        fed.push_back(t);
        generated_flag.push_back(0);
        records.push_back(nullptr);
      }
      for (const auto& r : group[i].outcome.tokens) {
        fed.push_back(r.token);
        generated_flag.push_back(1);
        records.push_back(&r);
      }
    }
    std::vector<int32_t> expect = f.ids;
    if (fed.size() + 1 == expect.size() && expect.back() == inference::kEndTurn) expect.pop_back();
    if (fed == expect) {
      found = true;
      EXPECT_TRUE(group.front().call.sequence_id.empty());
      for (size_t i = 1; i < group.size(); ++i) {
        EXPECT_EQ(group[i].call.sequence_id, group.front().outcome.sequence_id);
      }
      // At most the call's new tokens: a new sequence may take its prompt's leading blocks from
      // the engine's prefix cache (an earlier session with the same system prompt).
      for (const auto& c : group) EXPECT_LE(c.outcome.prefilled_tokens, c.call.new_tokens.size());
      break;
    }
  }
  EXPECT_TRUE(found) << "no engine sequence equals the stored segment of " << f.ids.size() << " tokens";
  if (!found) return 0;
  size_t generated = 0, row = 0;
  for (size_t i = 0; i < f.ids.size(); ++i) {
    const bool gen = i < generated_flag.size() && generated_flag[i] == 1;
    EXPECT_EQ(f.mask[i], gen ? 1u : 0u) << "position " << i;
    if (!gen) {
      EXPECT_EQ(f.logprobs[i], 0.0f);
      EXPECT_EQ(f.versions[i], -1);
      continue;
    }
    ++generated;
    EXPECT_EQ(f.logprobs[i], records[i]->logprob) << "position " << i;
    EXPECT_EQ(f.versions[i], records[i]->policy_version) << "position " << i;
    std::vector<int32_t> got(f.experts.begin() + row * width, f.experts.begin() + (row + 1) * width);
    EXPECT_EQ(got, records[i]->experts) << "position " << i;
    ++row;
  }
  EXPECT_EQ(f.experts.size(), generated * width);
  // One forward pass over the whole stored sequence reproduces the recorded logprobs.
  auto score = engine.Score("default", f.ids, 1, 0, false);
  EXPECT_TRUE(score.ok()) << score.status();
  if (score.ok()) {
    for (size_t i = 1; i < f.ids.size(); ++i) {
      if (f.mask[i] == 1) {
        EXPECT_NEAR(score->logprobs[i - 1], f.logprobs[i], 2e-3) << "position " << i;
      }
    }
  }
  return generated;
}

}  // namespace flotilla::worker::testing
