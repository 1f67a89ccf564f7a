// The `pre_tokenizer` of a tokenizer.json: Sequence, Split (Regex or String pattern, every
// behavior, invert) and ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), which
// must come last since it changes the alphabet. Splitting follows the Hugging Face library:
// each step splits every piece the previous step left, separately, and empty pieces vanish.
// Immutable and thread-safe; per-call state lives in PreTokenizer::Scratch.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hf/regex.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference::hf {

class PreTokenizer {
 public:
  struct Scratch {
    RegexScratch regex;
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<std::string_view> next;
    std::deque<std::string> owned;  // pieces that got a prefix space
  };

  // `where` names the field for errors ("tokenizer.json: pre_tokenizer").
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& j, const std::string& where);

  // Appends the pieces of `text` to *pieces (views into `text` or into scratch->owned, which
  // must outlive them). Fails only when a regex gives up on a piece (Regex::FindAll).
  absl::Status Split(std::string_view text, Scratch* scratch, std::vector<std::string_view>* pieces) const;

  // True when a ByteLevel step maps the pieces' bytes to the byte-level alphabet.
  bool byte_level() const { return byte_level_; }

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    std::unique_ptr<Regex> regex;  // null for a String pattern
    std::string literal;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool prefix_space = false;  // ByteLevel add_prefix_space
  };
  absl::Status Add(const nlohmann::json& j, const std::string& where, bool last);
  absl::Status SplitOne(const Step& step, std::string_view piece, Scratch* scratch, std::vector<std::string_view>* out) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace flotilla::inference::hf
