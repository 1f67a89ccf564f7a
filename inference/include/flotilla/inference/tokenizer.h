// The byte-level tokenizer and the one chat template. The Python side
// (trainer_bridge/python/flotilla_trainer/tokenizer.py) uses the very same definitions.
//
// Ids 0..255 are bytes. Special tokens follow. Thread-safe (stateless).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::inference {

enum SpecialToken : int32_t {
  kBos = 256,
  kEos = 257,
  kSystem = 258,     // starts a system turn
  kUser = 259,       // starts a user turn
  kAssistant = 260,  // starts an assistant turn
  kTool = 261,       // starts a tool-result turn
  kEndTurn = 262,    // ends any turn
  kToolCallBegin = 263,
  kToolCallEnd = 264,
  kPad = 265,
  kNumSpecial = 10,
};
constexpr int32_t kVocabSize = 272;  // 256 bytes + specials, padded to a multiple of 16

// Bytes of `text` as token ids (no specials are ever produced from text).
std::vector<int32_t> Encode(std::string_view text);
// Bytes back; special tokens render as their names ("<|end|>") unless skip_special.
std::string Decode(const std::vector<int32_t>& ids, bool skip_special = false);
std::string_view SpecialName(int32_t id);

}  // namespace flotilla::inference
