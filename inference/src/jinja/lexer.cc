#include "jinja/lexer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// jinja2 reads template source with \r\n, \r and \n all as one newline and drops a single
// trailing newline.
std::string NormalizeNewlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's str.rstrip() and `\s+` fullmatch, on UTF-8.
std::string RStrip(const std::string& s) { return PyStrip(s, std::nullopt, false, true); }
bool AllWhitespace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : Utf8Decode(s)) {
    if (!IsPySpace(c)) return false;
  }
  return true;
}

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    char c = s[++i];
    auto hex = [&](size_t len) -> bool {
      if (i + len >= s.size()) return false;
      std::string digits(s.substr(i + 1, len));
      if (digits.size() != len) return false;
      for (char d : digits) {
        if (!isxdigit(static_cast<unsigned char>(d))) return false;
      }
      AppendUtf8(out, static_cast<char32_t>(std::strtoul(digits.c_str(), nullptr, 16)));
      i += len;
      return true;
    };
    switch (c) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
        if (!hex(2)) out += "\\x";
        break;
      case 'u':
        if (!hex(4)) out += "\\u";
        break;
      case 'U':
        if (!hex(8)) out += "\\U";
        break;
      default:
        if (c >= '0' && c <= '7') {
          int v = 0, n = 0;
          while (n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7') {
            v = v * 8 + (s[i] - '0');
            ++i;
            ++n;
          }
          --i;
          AppendUtf8(out, static_cast<char32_t>(v));
        } else {
          out.push_back('\\');
          out.push_back(c);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, std::string_view name) : src_(NormalizeNewlines(source)), name_(name) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      size_t open = FindOpener(pos_);
      if (open == std::string::npos) {
        EmitText(src_.substr(pos_));
        break;
      }
      char kind = src_[open + 1];
      size_t after = open + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      size_t raw_body = kind == '%' ? MatchRawBegin(open) : std::string::npos;
      std::string text = src_.substr(pos_, open - pos_);
      int text_newlines = CountNewlines(text);
      EmitText(ApplyLeftStrip(std::move(text), sign, kind != '{'));
      line_ += text_newlines;
      if (raw_body != std::string::npos) {
        if (absl::Status s = LexRaw(open, raw_body); !s.ok()) return s;
        continue;
      }
      pos_ = after + (sign ? 1 : 0);
      absl::Status s = kind == '#' ? SkipComment() : LexTag(kind == '%');
      if (!s.ok()) return s;
    }
    tokens_.push_back(Token{Token::Kind::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  absl::Status Error(std::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", line_, ": ", std::string(msg)));
  }

  size_t FindOpener(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  size_t SkipSpaces(size_t p) const {
    while (p < src_.size() && IsSpaceByte(src_[p])) ++p;
    return p;
  }

  // The position after `{%[-+]? raw [-]?%}` (and the whitespace `-%}` eats), or npos.
  size_t MatchRawBegin(size_t open) const {
    size_t p = open + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = SkipSpaces(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return SkipSpaces(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  std::string ApplyLeftStrip(std::string text, char sign, bool lstrip_applies) const {
    if (sign == '-') return RStrip(text);
    if (sign == '+' || !lstrip_applies) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
    if ((l_pos > 0 || line_starting_) && AllWhitespace(std::string_view(text).substr(l_pos))) {
      text.resize(l_pos);
    }
    return text;
  }

  void EmitText(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{Token::Kind::kText, std::move(text), line_});
  }

  // Matches a tag end at pos_ for a block (`+%}`, `-%}` + whitespace, `%}` + one newline) or a
  // variable (`-}}` + whitespace, `}}`); advances past it.
  bool MatchTagEnd(bool block) {
    size_t start = pos_;
    char c = block ? '%' : '}';
    if (block && src_.compare(pos_, 3, "+%}") == 0) {
      pos_ += 3;
    } else if (src_.compare(pos_, 3, std::string("-") + c + "}") == 0) {
      pos_ = SkipSpaces(pos_ + 3);
    } else if (src_.compare(pos_, 2, std::string(1, c) + "}") == 0) {
      pos_ += 2;
      if (block && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
    } else {
      return false;
    }
    line_starting_ = src_[pos_ - 1] == '\n';
    line_ += CountNewlines(std::string_view(src_).substr(start, pos_ - start));
    return true;
  }

  absl::Status SkipComment() {
    size_t k = src_.find("#}", pos_);
    if (k == std::string::npos) return Error("missing end of comment tag");
    line_ += CountNewlines(std::string_view(src_).substr(pos_, k - pos_));
    char sign = k > pos_ && (src_[k - 1] == '-' || src_[k - 1] == '+') ? src_[k - 1] : 0;
    size_t end = k + 2;
    if (sign == '-') {
      end = SkipSpaces(end);
    } else if (sign == 0 && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_ += CountNewlines(std::string_view(src_).substr(k, end - k));
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return absl::OkStatus();
  }

  absl::Status LexRaw(size_t open, size_t body) {
    line_ += CountNewlines(std::string_view(src_).substr(open, body - open));
    line_starting_ = src_[body - 1] == '\n';
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign) ++q;
      q = SkipSpaces(q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = SkipSpaces(q + 6);
      size_t saved = pos_;
      pos_ = q;
      int saved_line = line_;
      std::string text = src_.substr(body, p - body);
      int text_newlines = CountNewlines(text);
      text = ApplyLeftStrip(std::move(text), sign, true);
      line_ += text_newlines;
      int text_line = saved_line;
      if (!MatchTagEnd(true)) {
        pos_ = saved;
        line_ = saved_line;
        continue;
      }
      if (!text.empty()) tokens_.push_back(Token{Token::Kind::kText, std::move(text), text_line});
      return absl::OkStatus();
    }
    return Error("missing end of raw directive");
  }

  absl::Status LexTag(bool block) {
    tokens_.push_back(Token{block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, "", line_});
    std::string balance;
    while (true) {
      size_t p = SkipSpaces(pos_);
      if (p > pos_) {
        line_ += CountNewlines(std::string_view(src_).substr(pos_, p - pos_));
        line_starting_ = src_[p - 1] == '\n';
        pos_ = p;
      }
      if (pos_ >= src_.size()) return Error("unexpected end of template inside a tag");
      if (balance.empty() && MatchTagEnd(block)) {
        tokens_.push_back(Token{block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", line_});
        return absl::OkStatus();
      }
      char c = src_[pos_];
      if (IsDigit(c)) {
        LexNumber();
      } else if (IsNameStart(c)) {
        size_t e = pos_;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        tokens_.push_back(Token{Token::Kind::kName, src_.substr(pos_, e - pos_), line_});
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        size_t e = pos_ + 1;
        while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= src_.size()) return Error("unterminated string literal");
        std::string_view body = std::string_view(src_).substr(pos_ + 1, e - pos_ - 1);
        tokens_.push_back(Token{Token::Kind::kString, Unescape(body), line_});
        line_ += CountNewlines(body);
        pos_ = e + 1;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                           "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* candidate : kOps) {
          if (src_.compare(pos_, std::char_traits<char>::length(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op.empty()) return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (op == "(" || op == "[" || op == "{") {
          balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty() || balance.back() != op[0]) return Error(absl::StrCat("unexpected '", op, "'"));
          balance.pop_back();
        }
        tokens_.push_back(Token{Token::Kind::kOp, op, line_});
        pos_ += op.size();
      }
    }
  }

  void LexNumber() {
    auto digits = [&](size_t p) {  // (\d+_)*\d+ ; returns the end or p when none
      size_t e = p;
      while (e < src_.size() && (IsDigit(src_[e]) || (src_[e] == '_' && e > p && e + 1 < src_.size() && IsDigit(src_[e + 1])))) ++e;
      return e;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot) {
      size_t f = e;
      if (f + 1 < src_.size() && src_[f] == '.' && IsDigit(src_[f + 1])) {
        f = digits(f + 1);
        is_float = true;
      }
      if (f < src_.size() && src_[f] == 'e') {
        size_t g = f + 1;
        if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
        if (g < src_.size() && IsDigit(src_[g])) {
          f = digits(g);
          is_float = true;
        }
      }
      if (is_float) e = f;
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, line_};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
    }
    tokens_.push_back(std::move(t));
    pos_ = e;
  }

  std::string src_;
  std::string name_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source, std::string_view name) {
  return Lexer(source, name).Run();
}

}  // namespace flotilla::inference::jinja
