#include "flotilla/synth/c_mutator.h"

#include <cctype>
#include <map>
#include <set>

#include <cstdio>
#include <cstdlib>
#include "absl/strings/str_cat.h"

namespace flotilla::synth {
namespace {

// This abseil's string_view is its own type: std::string_view is passed through this.
absl::string_view A(std::string_view v) { return absl::string_view(v.data(), v.size()); }

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Punctuators, longest first so that the first match is the longest.
constexpr std::string_view kPunctuators[] = {"<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=",
                                             "==",  "!=",  "&&",  "||", "*=", "/=", "%=", "+=", "-=", "&=",
                                             "^=",  "|=",  "##"};

const std::set<std::string_view>& NotCalls() {
  static const auto* s = new std::set<std::string_view>{"if", "while", "for", "switch", "return", "sizeof",
                                                        "defined", "_Alignof", "_Generic", "alignof"};
  return *s;
}

// A token before `name(` that makes it a call rather than a declaration or definition.
bool StartsExpression(const CToken& prev) {
  if (prev.kind == CToken::Kind::kIdentifier) return prev.text == "return" || prev.text == "case";
  if (prev.kind != CToken::Kind::kPunct) return false;
  return prev.text != ")" && prev.text != "]" && prev.text != "*";
}

bool IsDecimal(std::string_view t, std::string* digits, std::string* suffix) {
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0 || i > 9 || (t[0] == '0' && i > 1)) return false;
  for (size_t j = i; j < t.size(); ++j) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(t[j])));
    if (c != 'u' && c != 'l') return false;
  }
  *digits = std::string(t.substr(0, i));
  *suffix = std::string(t.substr(i));
  return true;
}

}  // namespace

std::vector<CToken> TokenizeC(std::string_view s) {
  std::vector<CToken> out;
  size_t i = 0;
  int line = 1;
  bool line_start = true;  // only whitespace since the last newline
  auto push = [&](CToken::Kind k, size_t a, size_t b, int ln) {
    out.push_back(CToken{k, a, b, ln, s.substr(a, b - a)});
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
      line_start = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '#' && line_start) {  // a preprocessor line, continuations included
      while (i < s.size() && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
          ++line;
          i += 2;
          continue;
        }
        if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '*') {
          size_t e = s.find("*/", i + 2);
          for (size_t k = i; k < (e == std::string_view::npos ? s.size() : e); ++k) line += s[k] == '\n';
          i = e == std::string_view::npos ? s.size() : e + 2;
          continue;
        }
        ++i;
      }
      continue;
    }
    line_start = false;
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t e = s.find("*/", i + 2);
      size_t stop = e == std::string_view::npos ? s.size() : e + 2;
      for (size_t k = i; k < stop; ++k) line += s[k] == '\n';
      i = stop;
      continue;
    }
    size_t start = i;
    int start_line = line;
    if (c == '"' || c == '\'') {
      ++i;
      while (i < s.size() && s[i] != c && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
      i = std::min(i + 1, s.size());
      push(c == '"' ? CToken::Kind::kString : CToken::Kind::kChar, start, i, start_line);
      continue;
    }
    if (IsIdentStart(c)) {
      while (i < s.size() && IsIdentChar(s[i])) ++i;
      // L"..", u8"..": a prefixed literal is one string token.
      if (i < s.size() && (s[i] == '"' || s[i] == '\'') && i - start <= 2) {
        char q = s[i++];
        while (i < s.size() && s[i] != q && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
        i = std::min(i + 1, s.size());
        push(CToken::Kind::kString, start, i, start_line);
        continue;
      }
      push(CToken::Kind::kIdentifier, start, i, start_line);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      while (i < s.size() && (IsIdentChar(s[i]) || s[i] == '.' ||
                              ((s[i] == '+' || s[i] == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E' ||
                                                               s[i - 1] == 'p' || s[i - 1] == 'P')))) {
        ++i;
      }
      push(CToken::Kind::kNumber, start, i, start_line);
      continue;
    }
    size_t len = 1;
    for (std::string_view p : kPunctuators) {
      if (s.substr(i, p.size()) == p) {
        len = p.size();
        break;
      }
    }
    i += len;
    push(CToken::Kind::kPunct, start, i, start_line);
  }
  return out;
}

std::vector<SourceEdit> MutateC(const std::string& file, std::string_view source) {
  static const std::map<std::string_view, std::string_view> kCompare = {
      {"==", "!="}, {"!=", "=="}, {"<", ">="}, {">=", "<"}, {">", "<="}, {"<=", ">"}};
  std::vector<CToken> t = TokenizeC(source);
  std::vector<SourceEdit> out;
  auto add = [&](const char* kind, int line, size_t a, size_t b, std::string repl, std::string what) {
    out.push_back(SourceEdit{file, kind, line, a, b, std::move(repl), std::move(what)});
  };
  int depth = 0;  // brace depth: mutations only inside function bodies and initializers
  for (size_t k = 0; k < t.size(); ++k) {
    const CToken& tok = t[k];
    if (tok.text == "{") ++depth;
    if (tok.text == "}") depth = std::max(0, depth - 1);
    if (depth == 0) continue;
    if (tok.kind == CToken::Kind::kPunct) {
      auto it = kCompare.find(tok.text);
      if (it != kCompare.end()) {
        add("flip_compare", tok.line, tok.start, tok.end, std::string(it->second),
            absl::StrCat("comparison '", A(tok.text), "' flipped to '", A(it->second), "'"));
      } else if (tok.text == "&&" || tok.text == "||") {
        std::string other = tok.text == "&&" ? "||" : "&&";
        add("flip_boolean", tok.line, tok.start, tok.end, other,
            absl::StrCat("boolean '", A(tok.text), "' flipped to '", other, "'"));
      }
    } else if (tok.kind == CToken::Kind::kNumber) {
      std::string digits, suffix;
      // Array sizes in declarations ("char buf[16]") are left alone: a larger buffer is no bug.
      bool in_brackets = k > 0 && t[k - 1].text == "[";
      if (IsDecimal(tok.text, &digits, &suffix) && !in_brackets) {
        long v = std::stol(digits);
        add("off_by_one", tok.line, tok.start, tok.end, absl::StrCat(v + 1, suffix),
            absl::StrCat("constant ", A(tok.text), " changed to ", v + 1, suffix));
        add("change_constant", tok.line, tok.start, tok.end, absl::StrCat(v == 0 ? 1 : 0, suffix),
            absl::StrCat("constant ", A(tok.text), " changed to ", v == 0 ? 1 : 0, suffix));
      }
    } else if (tok.kind == CToken::Kind::kIdentifier && tok.text == "return") {
      size_t e = k + 1;
      int paren = 0;
      while (e < t.size() && !(paren == 0 && t[e].text == ";")) {
        if (t[e].text == "(") ++paren;
        if (t[e].text == ")") --paren;
        if (t[e].text == "{" || t[e].text == "}") break;
        ++e;
      }
      if (e < t.size() && t[e].text == ";") {
        add("drop_return", tok.line, tok.start, t[e].end, ";",
            absl::StrCat("return statement at line ", tok.line, " dropped"));
      }
    } else if (tok.kind == CToken::Kind::kIdentifier && tok.text == "if" && k + 1 < t.size() &&
               t[k + 1].text == "(") {
      size_t e = k + 2;
      int paren = 1;
      for (; e < t.size(); ++e) {
        if (t[e].text == "(") ++paren;
        if (t[e].text == ")" && --paren == 0) break;
      }
      if (e < t.size() && e > k + 2) {
        add("drop_branch", tok.line, t[k + 2].start, t[e].start, "0",
            absl::StrCat("if branch at line ", tok.line, " disabled"));
      }
    } else if (tok.kind == CToken::Kind::kIdentifier && k + 1 < t.size() && t[k + 1].text == "(" &&
               NotCalls().count(tok.text) == 0 && k > 0 && StartsExpression(t[k - 1])) {
      // The first two arguments of a call, split at commas of depth 0.
      std::vector<std::pair<size_t, size_t>> args;  // token index ranges [a, b)
      size_t a = k + 2;
      int paren = 1;
      size_t e = k + 2;
      for (; e < t.size() && paren > 0; ++e) {
        const std::string_view x = t[e].text;
        if (x == "(" || x == "[" || x == "{") ++paren;
        if (x == ")" || x == "]" || x == "}") --paren;
        if ((paren == 1 && x == ",") || paren == 0) {
          args.emplace_back(a, e);
          a = e + 1;
          if (args.size() == 2) break;
        }
      }
      if (args.size() == 2 && args[0].second > args[0].first && args[1].second > args[1].first) {
        size_t s0 = t[args[0].first].start, e0 = t[args[0].second - 1].end;
        size_t s1 = t[args[1].first].start, e1 = t[args[1].second - 1].end;
        std::string_view x = source.substr(s0, e0 - s0), y = source.substr(s1, e1 - s1);
        if (x != y) {
          add("swap_args", tok.line, s0, e1, absl::StrCat(A(y), A(source.substr(e0, s1 - e0)), A(x)),
              absl::StrCat("arguments '", A(x), "' and '", A(y), "' of ", A(tok.text), "() swapped"));
        }
      }
    }
  }
  return out;
}

std::string ApplyEdit(std::string_view source, const SourceEdit& edit) {
  if (edit.start > edit.end || edit.end > source.size()) {  // callers check the range first
    std::fprintf(stderr, "ApplyEdit: %s: edit [%zu, %zu) outside %zu bytes\n", edit.file.c_str(), edit.start,
                 edit.end, source.size());
    std::abort();
  }
  return absl::StrCat(A(source.substr(0, edit.start)), edit.replacement, A(source.substr(edit.end)));
}

}  // namespace flotilla::synth
