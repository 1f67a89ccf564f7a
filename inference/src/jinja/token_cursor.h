// A position in the lexer's tokens, with the helpers both parsers use to look, advance and
// report "<name>:<line>: ..." errors.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "jinja/lexer.h"

namespace flotilla::inference::jinja {

class TokenCursor {
 public:
  TokenCursor(const std::vector<Token>& tokens, std::string_view name) : t_(tokens), name_(name) {}

 protected:
  using K = Token::Kind;

  const Token& Cur() const { return t_[pos_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().kind == K::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().kind == K::kName && Cur().text == n; }
  void Next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }

  absl::Status Error(std::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", Cur().line, ": ", std::string(msg)));
  }
  std::string Describe() const {
    switch (Cur().kind) {
      case K::kEof: return "end of template";
      case K::kBlockEnd: return "end of statement block";
      case K::kVarEnd: return "end of print statement";
      case K::kText: return "template data";
      default: return absl::StrCat("'", Cur().text, "'");
    }
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(op)) return Error(absl::StrCat("expected '", std::string(op), "', got ", Describe()));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().kind != K::kBlockEnd) return Error(absl::StrCat("expected end of statement block, got ", Describe()));
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().kind != K::kName) return Error(absl::StrCat("expected a name, got ", Describe()));
    std::string n = Cur().text;
    Next();
    return n;
  }

  const std::vector<Token>& t_;
  std::string name_;
  size_t pos_ = 0;
};

}  // namespace flotilla::inference::jinja
