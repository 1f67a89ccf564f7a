// The added tokens of a tokenizer.json, matched in text before the model sees it, as the
// Hugging Face library does: leftmost-longest over all contents, then the token's flags —
// single_word (only between non-word characters), lstrip / rstrip (swallow the whitespace
// beside it). Two sets: tokens with normalized=false match the raw text, those with
// normalized=true match the normalized text (their contents normalized too). Immutable after
// Build, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::inference::hf {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class AddedTokenMatcher {
 public:
  // `tokens` must outlive the matcher; `patterns` are their contents as matched (normalized
  // where the set is the normalized one), same order.
  void Build(const std::vector<const AddedToken*>& tokens, const std::vector<std::string>& patterns);
  bool empty() const { return tokens_.empty(); }

  struct Segment {
    size_t begin, end;
    const AddedToken* token;  // null for plain text
  };
  // Cuts `text` into plain-text segments and matched tokens, in order, covering it (empty
  // plain segments are left out). With skip_special, special tokens are not matched: they stay
  // in the text (the library's encode_special_tokens).
  void Cut(std::string_view text, bool skip_special, std::vector<Segment>* out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
    int32_t token = -1;                                   // index into tokens_ ending here
  };
  int32_t Child(int32_t node, unsigned char b) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace flotilla::inference::hf
