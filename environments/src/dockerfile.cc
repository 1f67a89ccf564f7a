#include "flotilla/environments/dockerfile.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace flotilla::environments {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// A JSON array of strings ("exec form"); false when `text` is not one (then it is shell form).
bool ParseJsonStrings(const std::string& text, std::vector<std::string>* out) {
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && absl::ascii_isspace(text[i])) ++i;
  };
  skip();
  if (i >= text.size() || text[i] != '[') return false;
  ++i;
  skip();
  if (i < text.size() && text[i] == ']') {
    ++i;
    skip();
    return i == text.size();
  }
  for (;;) {
    skip();
    if (i >= text.size() || text[i] != '"') return false;
    ++i;
    std::string s;
    for (;;) {
      if (i >= text.size()) return false;
      char c = text[i++];
      if (c == '"') break;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i >= text.size()) return false;
      char e = text[i++];
      switch (e) {
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'u': {
          if (i + 4 > text.size()) return false;
          unsigned v = 0;
          for (int k = 0; k < 4; ++k) {
            char h = text[i++];
            if (!absl::ascii_isxdigit(h)) return false;
            v = v * 16 + static_cast<unsigned>(absl::ascii_isdigit(h) ? h - '0' : (absl::ascii_tolower(h) - 'a' + 10));
          }
          if (v >= 0x80) return false;  // task files never need more than ASCII escapes
          s += static_cast<char>(v);
          break;
        }
        default: s += e;  // \" \\ \/
      }
    }
    out->push_back(std::move(s));
    skip();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') {
      ++i;
      skip();
      return i == text.size();
    }
    return false;
  }
}

// Finds the here-document markers (<<WORD, <<-WORD, <<"WORD", <<'WORD') of an instruction line.
std::vector<HereDoc> FindHereDocs(const std::string& args) {
  std::vector<HereDoc> out;
  for (size_t p = args.find("<<"); p != std::string::npos; p = args.find("<<", p + 2)) {
    size_t i = p + 2;
    HereDoc h;
    if (i < args.size() && args[i] == '-') {
      h.strip_tabs = true;
      ++i;
    }
    char quote = 0;
    if (i < args.size() && (args[i] == '"' || args[i] == '\'')) quote = args[i++];
    size_t start = i;
    while (i < args.size() && IsNameChar(args[i])) ++i;
    if (i == start || !IsNameStart(args[start])) continue;
    if (quote != 0 && (i >= args.size() || args[i] != quote)) continue;
    h.name = args.substr(start, i - start);
    out.push_back(h);
  }
  return out;
}

}  // namespace

absl::StatusOr<Dockerfile> ParseDockerfile(const std::string& text, const std::string& file) {
  Dockerfile df;
  df.file = file;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (std::string& l : lines) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  size_t i = 0;
  while (i < lines.size()) {
    absl::string_view first = absl::StripLeadingAsciiWhitespace(lines[i]);
    if (first.empty() || first[0] == '#') {
      ++i;
      continue;
    }
    Instruction in;
    in.line = static_cast<int>(i) + 1;
    std::string logical;
    for (;;) {
      absl::string_view cur = absl::StripTrailingAsciiWhitespace(lines[i]);
      ++i;
      if (absl::EndsWith(cur, "\\")) {
        logical += std::string(cur.substr(0, cur.size() - 1));
        // Comment lines inside a continuation are dropped, as Docker does.
        while (i < lines.size() && absl::StartsWith(absl::StripLeadingAsciiWhitespace(lines[i]), "#")) ++i;
        if (i < lines.size()) continue;
        break;
      }
      logical += std::string(cur);
      break;
    }
    logical = std::string(absl::StripAsciiWhitespace(logical));
    if (logical.empty()) continue;  // a continuation of nothing ("\\" then blank lines): no instruction
    size_t sp = logical.find_first_of(" \t");
    in.keyword = absl::AsciiStrToUpper(logical.substr(0, sp));
    std::string rest = sp == std::string::npos ? "" : std::string(absl::StripLeadingAsciiWhitespace(logical.substr(sp)));
    for (char c : in.keyword) {
      if (!absl::ascii_isalpha(c)) {
        return absl::InvalidArgumentError(absl::StrCat(file, ":", in.line, ": '", in.keyword, "' is not an instruction"));
      }
    }
    while (absl::StartsWith(rest, "--")) {
      size_t end = rest.find_first_of(" \t");
      std::string flag = rest.substr(2, end == std::string::npos ? std::string::npos : end - 2);
      size_t eq = flag.find('=');
      in.flags[flag.substr(0, eq)] = eq == std::string::npos ? "" : flag.substr(eq + 1);
      rest = end == std::string::npos ? "" : std::string(absl::StripLeadingAsciiWhitespace(rest.substr(end)));
    }
    in.args = rest;
    in.text = logical;
    in.exec_form = ParseJsonStrings(rest, &in.exec_args);
    if (!in.exec_form) in.exec_args.clear();
    if (in.keyword == "RUN" || in.keyword == "COPY" || in.keyword == "ADD") {
      in.heredocs = FindHereDocs(rest);
      for (HereDoc& h : in.heredocs) {
        bool closed = false;
        while (i < lines.size()) {
          std::string l = lines[i++];
          if (h.strip_tabs) l = std::string(absl::StripLeadingAsciiWhitespace(l)).empty() ? "" : l.substr(l.find_first_not_of('\t'));
          if (l == h.name) {
            closed = true;
            break;
          }
          absl::StrAppend(&h.body, l, "\n");
        }
        if (!closed) {
          return absl::InvalidArgumentError(
              absl::StrCat(file, ":", in.line, ": ", in.keyword, ": here-document <<", h.name, " is never closed"));
        }
        absl::StrAppend(&in.text, "\n", h.body, h.name);
      }
    }
    df.instructions.push_back(std::move(in));
  }
  if (df.instructions.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": no instructions"));
  if (df.instructions.front().keyword != "FROM" && df.instructions.front().keyword != "ARG") {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", df.instructions.front().line,
                                                   ": the first instruction must be FROM (or ARG before FROM)"));
  }
  return df;
}

namespace {

// ${A:-${B:-...}} nests; Docker takes a handful of levels in practice. Past this a Dockerfile is
// refused: each level re-scans the rest of the word, so deep nesting costs quadratic time and
// as much stack as it has levels.
constexpr int kMaxSubstitutionDepth = 16;

absl::StatusOr<std::string> ExpandAt(const std::string& text, const std::map<std::string, std::string>& vars,
                                     int nesting) {
  if (nesting > kMaxSubstitutionDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable substitution nested deeper than ", kMaxSubstitutionDepth, " levels"));
  }
  std::string out;
  auto lookup = [&](const std::string& name) -> const std::string* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (c != '$' || i + 1 >= text.size()) {
      out += c;
      continue;
    }
    if (text[i + 1] == '{') {
      int depth = 1;
      size_t j = i + 2;
      for (; j < text.size() && depth > 0; ++j) {
        if (text[j] == '{') ++depth;
        if (text[j] == '}') --depth;
      }
      if (depth != 0) return absl::InvalidArgumentError(absl::StrCat("unterminated ${ in '", text, "'"));
      std::string inner = text.substr(i + 2, j - 1 - (i + 2));
      size_t k = 0;
      while (k < inner.size() && IsNameChar(inner[k])) ++k;
      std::string name = inner.substr(0, k);
      if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("bad substitution '${", inner, "}'"));
      const std::string* v = lookup(name);
      if (k == inner.size()) {
        if (v != nullptr) out += *v;
      } else if (absl::StartsWith(inner.substr(k), ":-") || absl::StartsWith(inner.substr(k), ":+")) {
        bool use_default = inner[k + 1] == '-';
        absl::StatusOr<std::string> word = ExpandAt(inner.substr(k + 2), vars, nesting + 1);
        if (!word.ok()) return word.status();
        bool set = v != nullptr && !v->empty();
        if (use_default) {
          out += set ? *v : *word;
        } else if (set) {
          out += *word;
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat("bad substitution '${", inner, "}'"));
      }
      i = j - 1;
      continue;
    }
    if (IsNameStart(text[i + 1])) {
      size_t j = i + 1;
      while (j < text.size() && IsNameChar(text[j])) ++j;
      if (const std::string* v = lookup(text.substr(i + 1, j - i - 1))) out += *v;
      i = j - 1;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ExpandVariables(const std::string& text, const std::map<std::string, std::string>& vars) {
  return ExpandAt(text, vars, 0);
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
      continue;
    }
    if (absl::ascii_isspace(c)) {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
      continue;
    }
    cur += c;
    in_word = true;
  }
  if (in_word) out.push_back(cur);
  return out;
}

}  // namespace flotilla::environments
