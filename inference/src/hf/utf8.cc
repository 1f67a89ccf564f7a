#include "hf/utf8.h"

namespace flotilla::inference::hf {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are an
// invalid subpart; *subpart then gets the maximal subpart's length (>= 1), and *truncated is
// true when that subpart is valid so far but runs off the end of `s`.
int SequenceAt(std::string_view s, size_t i, size_t* subpart, bool* truncated) {
  *truncated = false;
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *subpart = 1;
    return 0;
  }
  size_t k = 1;
  for (int j = 0; j < need; ++j, ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      *subpart = k;
      return 0;
    }
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = j == 0 ? lo : 0x80, h = j == 0 ? hi : 0xBF;
    if (b < l || b > h) {
      *subpart = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0, sub;
  bool truncated;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int n = SequenceAt(s, i, &sub, &truncated);
    if (n == 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::string Utf8Lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, sub;
  bool truncated;
  while (i < s.size()) {
    int n = SequenceAt(s, i, &sub, &truncated);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");
      i += sub;
    }
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view s) {
  size_t start = s.size() >= 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a lead byte
    size_t sub;
    bool truncated;
    if (SequenceAt(s, i, &sub, &truncated) == 0 && truncated) return s.size() - i;
  }
  return 0;
}

char32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  if (b0 < 0x80) {
    ++*pos;
    return b0;
  }
  int n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (int k = 1; k < n && *pos + static_cast<size_t>(k) < s.size(); ++k) {
    cp = (cp << 6) | (static_cast<uint8_t>(s[*pos + static_cast<size_t>(k)]) & 0x3F);
  }
  *pos += static_cast<size_t>(n);
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsUnicodeWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

const ByteLevelMap& ByteLevelMap::Get() {
  static const ByteLevelMap* map = new ByteLevelMap();
  return *map;
}

ByteLevelMap::ByteLevelMap() {
  byte_of_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    AppendUtf8(cp, &encoded_[static_cast<size_t>(b)]);
    byte_of_[cp] = static_cast<int16_t>(b);
  }
}

void ByteLevelMap::EncodeAppend(std::string_view bytes, std::string* out) const {
  for (char c : bytes) out->append(encoded_[static_cast<uint8_t>(c)]);
}

bool ByteLevelMap::Decode(std::string_view token, std::string* out) const {
  const size_t mark = out->size();
  size_t pos = 0;
  while (pos < token.size()) {
    const auto b0 = static_cast<uint8_t>(token[pos]);
    if (b0 >= 0xE0) {  // every mapped code point is below U+0800
      out->resize(mark);
      return false;
    }
    char32_t cp = NextCodePoint(token, &pos);
    if (cp >= byte_of_.size() || byte_of_[cp] < 0) {
      out->resize(mark);
      return false;
    }
    out->push_back(static_cast<char>(byte_of_[cp]));
  }
  return true;
}

}  // namespace flotilla::inference::hf
