// UTF-8 helpers of the Hugging Face tokenizer: validation, lossy decoding with the same
// replacement rule as Rust's String::from_utf8_lossy (one U+FFFD per maximal invalid subpart),
// the length of a trailing incomplete sequence (for streaming), Unicode White_Space and the
// GPT-2 byte <-> printable-character map of the ByteLevel pre-tokenizer and decoder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flotilla::inference::hf {

// Offset of the first byte that is not part of valid UTF-8, or npos when all of `s` is valid.
size_t FirstInvalidUtf8(std::string_view s);

// `s` with every maximal invalid subpart replaced by U+FFFD.
std::string Utf8Lossy(std::string_view s);

// Number of bytes at the end of `s` that begin a UTF-8 sequence that is valid so far but not
// complete (0..3). Holding them back until more bytes arrive never changes the lossy decoding.
size_t IncompleteUtf8Tail(std::string_view s);

// Decodes one code point at s[*pos] (valid UTF-8 assumed) and advances *pos.
char32_t NextCodePoint(std::string_view s, size_t* pos);
void AppendUtf8(char32_t cp, std::string* out);

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool IsUnicodeWhitespace(char32_t cp);

// The ByteLevel map: every byte to one printable code point (bytes that are printable Latin-1
// map to themselves, the rest to U+0100 upward), and back.
class ByteLevelMap {
 public:
  static const ByteLevelMap& Get();
  // The UTF-8 of the code point that stands for byte b.
  std::string_view Encode(uint8_t b) const { return encoded_[b]; }
  // Appends the byte-level form of `bytes` to *out.
  void EncodeAppend(std::string_view bytes, std::string* out) const;
  // The bytes of a token in byte-level form; false when some character is not in the map.
  bool Decode(std::string_view token, std::string* out) const;

 private:
  ByteLevelMap();
  std::array<std::string, 256> encoded_;
  std::array<int16_t, 324> byte_of_;  // code point -> byte, -1 if none
};

}  // namespace flotilla::inference::hf
