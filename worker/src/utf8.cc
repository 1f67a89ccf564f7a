// UTF-8 hygiene for text decoded from byte tokens: the model may emit any byte sequence, and
// the wire formats are JSON, which must carry valid UTF-8.
#include <cstdint>

#include "flotilla/worker/chat_types.h"

namespace flotilla::worker {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (0 if invalid), and whether the
// sequence was cut short by the end of the input (`truncated`).
size_t SequenceLength(std::string_view s, size_t i, bool* truncated) {
  *truncated = false;
  const auto c = static_cast<uint8_t>(s[i]);
  size_t len;
  uint32_t min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  uint32_t cp = c & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      return 0;
    }
    const auto cc = static_cast<uint8_t>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
    // Reject overlong and surrogate prefixes as early as the second byte allows.
    if (k == 1 && len == 3 && ((c == 0xE0 && cc < 0xA0) || (c == 0xED && cc > 0x9F))) return 0;
    if (k == 1 && len == 4 && ((c == 0xF0 && cc < 0x90) || (c == 0xF4 && cc > 0x8F))) return 0;
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool truncated;
    size_t n = SequenceLength(bytes, i, &truncated);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool truncated;
    size_t n = SequenceLength(bytes, i, &truncated);
    if (truncated) return i;
    i += n == 0 ? 1 : n;
  }
  return i;
}

}  // namespace flotilla::worker
