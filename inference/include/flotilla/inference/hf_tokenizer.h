// A Hugging Face tokenizer loaded from a model folder's tokenizer.json (+ tokenizer_config.json
// for bos/eos/pad and add_bos_token/add_eos_token): byte-level BPE with the normalizer and the
// pre-tokenizer's Split regexes (PCRE2), added and special tokens matched before BPE. Token ids
// equal the `tokenizers` library's encode(text, add_special_tokens=False); decoding equals its
// decode. Features it does not implement (another model type, another pre-tokenizer, ...) are
// refused at load with the file and field named.
//
// Thread-safe: Encode/Decode may run concurrently (the BPE cache is locked inside). The byte
// tokenizer of tokenizer.h is separate and unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace flotilla::inference {

namespace hf {
class Normalizer;
class PreTokenizer;
class BpeModel;
class AddedTokenMatcher;
struct AddedToken;
}  // namespace hf

class HfTokenizer {
 public:
  // Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadDir(const std::string& dir);
  // From the files' contents; `config_json` may be empty. `source` names the folder in errors.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(std::string_view tokenizer_json,
                                                               std::string_view config_json,
                                                               const std::string& source);
  ~HfTokenizer();
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  // The ids of `text` (UTF-8; InvalidArgument naming the byte offset otherwise). With
  // parse_special, special tokens written in the text become their ids; without, they are
  // encoded as plain text (non-special added tokens still match), as the library's
  // encode_special_tokens does. No bos/eos is added: see add_bos_token(). ResourceExhausted
  // when a pre-tokenizer regex gives up on a pathological piece (PCRE2's limits).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool parse_special = true) const;

  // The text of `ids`. Bytes that do not form UTF-8 become U+FFFD; ids out of range are skipped.
  std::string Decode(absl::Span<const int32_t> ids, bool skip_special = false) const;
  // The raw bytes of one id (byte-level decoded; may be part of a UTF-8 character).
  std::string TokenBytes(int32_t id) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;  // vocab or added token
  bool IsSpecial(int32_t id) const;
  // One past the highest id of the vocab and the added tokens.
  int32_t vocab_size() const { return vocab_size_; }

  // From tokenizer_config.json (bos_token, eos_token, pad_token, add_bos_token, add_eos_token).
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> pad_id() const { return pad_id_; }
  bool add_bos_token() const { return add_bos_; }
  bool add_eos_token() const { return add_eos_; }

 private:
  friend class HfStreamingDecoder;
  HfTokenizer();
  absl::Status LoadConfig(std::string_view config_json, const std::string& where);

  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::BpeModel> model_;
  std::vector<hf::AddedToken> added_;
  std::unique_ptr<hf::AddedTokenMatcher> raw_matcher_;         // normalized=false tokens
  std::unique_ptr<hf::AddedTokenMatcher> normalized_matcher_;  // normalized=true tokens
  std::vector<int32_t> added_index_;                           // id -> index into added_, or -1
  bool byte_level_decoder_ = false;
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_, eos_id_, pad_id_;
  bool add_bos_ = false, add_eos_ = false;
};

// Turns ids into text as they are generated, never emitting part of a UTF-8 character: bytes
// of an incomplete character wait for the next id. The concatenation of every Push and the
// final Finish equals HfTokenizer::Decode of all the ids. Not thread-safe; borrows the
// tokenizer, which must outlive it.
class HfStreamingDecoder {
 public:
  explicit HfStreamingDecoder(const HfTokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // The text that is complete after `id` (possibly empty).
  std::string Push(int32_t id);
  // What is left (an incomplete character at the end becomes U+FFFD); the decoder is then empty.
  std::string Finish();

 private:
  const HfTokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace flotilla::inference
