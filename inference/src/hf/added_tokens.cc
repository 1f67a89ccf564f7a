#include "hf/added_tokens.h"

#include <algorithm>

#include "hf/utf8.h"
#include "utf8proc.h"

namespace flotilla::inference::hf {
namespace {

// A word character as the regex \w counts it: letters, marks, decimal digits, connectors.
bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// The code point that ends text[0, end).
char32_t LastCodePoint(std::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return NextCodePoint(text, &b);
}

}  // namespace

int32_t AddedTokenMatcher::Child(int32_t node, unsigned char b) const {
  const auto& next = nodes_[static_cast<size_t>(node)].next;
  auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, int32_t{-1}));
  return it != next.end() && it->first == b ? it->second : -1;
}

void AddedTokenMatcher::Build(const std::vector<const AddedToken*>& tokens, const std::vector<std::string>& patterns) {
  tokens_ = tokens;
  nodes_.assign(1, Node());
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (char c : p) {
      const auto b = static_cast<unsigned char>(c);
      int32_t child = Child(node, b);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& next = nodes_[static_cast<size_t>(node)].next;
        next.insert(std::lower_bound(next.begin(), next.end(), std::make_pair(b, int32_t{-1})), {b, child});
      }
      node = child;
    }
    // The first token with a content wins, as in the library's map from content to token.
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(t);
  }
}

void AddedTokenMatcher::Cut(std::string_view text, bool skip_special, std::vector<Segment>* out) const {
  size_t start_offset = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // Longest token starting at pos.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = Child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token >= 0) {
        best = nodes_[static_cast<size_t>(node)].token;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken* tok = tokens_[static_cast<size_t>(best)];
    size_t start = pos, stop = best_end;
    pos = best_end;  // a skipped match is consumed all the same, as in the library
    if (skip_special && tok->special) continue;
    if (tok->single_word) {
      const bool start_space = start == 0 || !IsWordChar(LastCodePoint(text, start));
      size_t p = stop;
      const bool stop_space = stop == text.size() || !IsWordChar(NextCodePoint(text, &p));
      if (!start_space || !stop_space) continue;
    }
    if (tok->lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t q = b;
        if (!IsUnicodeWhitespace(NextCodePoint(text, &q))) break;
        s = b;
      }
      start = std::max(s, start_offset);
    }
    if (tok->rstrip) {
      size_t e = stop;
      while (e < text.size()) {
        size_t q = e;
        if (!IsUnicodeWhitespace(NextCodePoint(text, &q))) break;
        e = q;
      }
      stop = e;
    }
    if (start_offset < start) out->push_back({start_offset, start, nullptr});
    out->push_back({start, stop, tok});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < text.size()) out->push_back({start_offset, text.size(), nullptr});
}

}  // namespace flotilla::inference::hf
