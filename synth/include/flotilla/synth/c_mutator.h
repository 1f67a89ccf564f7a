// Token-level mutations of C source, for synthesized bugs.
//
//   std::vector<SourceEdit> edits = MutateC("src/scanner.c", text);
//   std::string broken = ApplyEdit(text, edits[3]);
//
// TokenizeC is a small C lexer: identifiers, numbers, string and character literals (with
// escapes), punctuators (longest match), comments skipped, preprocessor lines skipped whole
// (with their backslash continuations). It never fails: a byte it does not know becomes a
// one-byte punctuator. Mutations (kinds): flip_compare (== != < > <= >=), flip_boolean (&& ||),
// off_by_one (a decimal constant plus one), change_constant (a decimal constant to 0, or 0 to
// 1), drop_return (a return statement becomes an empty statement), drop_branch (an if's
// condition becomes 0) and swap_args (the first two arguments of a call). Pure, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::synth {

struct CToken {
  enum class Kind { kIdentifier, kNumber, kString, kChar, kPunct };
  Kind kind = Kind::kPunct;
  size_t start = 0;  // byte offsets into the source
  size_t end = 0;
  int line = 1;      // 1-based
  std::string_view text;
};

std::vector<CToken> TokenizeC(std::string_view source);

// One replacement of bytes [start, end) of `file` by `replacement`.
struct SourceEdit {
  std::string file;
  std::string kind;
  int line = 0;
  size_t start = 0;
  size_t end = 0;
  std::string replacement;
  std::string description;
};

std::vector<SourceEdit> MutateC(const std::string& file, std::string_view source);

// `source` with the edit applied; the edit must lie inside it (CHECKed).
std::string ApplyEdit(std::string_view source, const SourceEdit& edit);

}  // namespace flotilla::synth
