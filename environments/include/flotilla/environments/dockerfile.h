// Dockerfile: the instructions of a Dockerfile, parsed but not yet evaluated.
//
//   ASSIGN_OR_RETURN(Dockerfile df, ParseDockerfile(text, "environment/Dockerfile"));
//   for (const Instruction& in : df.instructions) ...   // in.line names it in messages
//
// Parsing follows Docker's rules for the subset task environments use: `#` comment lines,
// parser directives are ignored, a trailing backslash continues an instruction on the next
// line (comment lines inside a continuation are dropped), keywords are case-insensitive,
// `--name=value` flags come before the arguments, an argument that is a JSON array of strings
// is the exec form, and `<<WORD` / `<<-WORD` here-documents (RUN, COPY) take the lines up to
// WORD. Variables are not expanded here (ExpandVariables does that during the build, with the
// ARG and ENV values in effect at that instruction).
//
// Errors: InvalidArgument naming "<file>:<line>: <keyword>" and what is wrong. Thread-safe
// (pure functions).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::environments {

struct HereDoc {
  std::string name;     // the terminator word
  std::string body;     // the lines between, each ending in '\n'
  bool strip_tabs = false;  // `<<-`: leading tabs removed
};

struct Instruction {
  int line = 0;                              // 1-based line of the keyword
  std::string keyword;                       // upper case: "RUN", "COPY", ...
  std::map<std::string, std::string> flags;  // "--from=build" -> {"from", "build"}
  std::string args;                          // the text after the flags (continuations joined)
  bool exec_form = false;                    // args was a JSON array of strings
  std::vector<std::string> exec_args;        // its elements when exec_form
  std::vector<HereDoc> heredocs;
  std::string text;                          // the instruction as written, continuations joined
};

struct Dockerfile {
  std::string file;  // the name used in messages
  std::vector<Instruction> instructions;
};

absl::StatusOr<Dockerfile> ParseDockerfile(const std::string& text, const std::string& file);

// $NAME, ${NAME}, ${NAME:-default} and ${NAME:+alternative} replaced from `vars` (unset names
// are empty); `\$` stays a literal `$`. InvalidArgument for an unterminated `${`.
absl::StatusOr<std::string> ExpandVariables(const std::string& text, const std::map<std::string, std::string>& vars);

// Whitespace-separated words, with '...' and "..." quoting (the quotes removed).
std::vector<std::string> SplitWords(const std::string& text);

}  // namespace flotilla::environments
