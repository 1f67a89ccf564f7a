// StatementWriter: a validated candidate's problem statement written by a model (synth_model.h)
// as an issue a user might file, from what the agent may know: the package, the language, the
// failing tests' names and their assertion messages. The prompt never holds the diff, the file
// or the replaced code. A statement that leaks the fix (contains a line unique to the fixed
// file or a line unique to the broken one, whitespace aside), names nothing of the failing
// tests, is empty, too long or cut at the token limit is refused: the caller keeps the deterministic statement (task_writer.h's
// ProblemStatement) and records why.
//
//   StatementOutcome s = WriteStatement(model, request);
//   spec.statement = s.statement;  // "" when refused
//
// Pure except for the model's request; thread-safe as SynthModel is.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "synth_model.h"

namespace flotilla::synth {

extern const char kStatementSystemPrompt[];

struct StatementRequest {
  std::string package;
  std::string language;  // "python" or "c"
  std::vector<std::string> fail_to_pass;
  std::map<std::string, std::string> messages;  // failing test -> assertion message
  std::string fixed_content;                    // the file as the fix leaves it (leak check only)
  std::string broken_content;                   // and as the task ships it (leak check only)
};

// The user turn: the package, the language, up to 20 failing tests with their messages.
std::string StatementPrompt(const StatementRequest& r);

// The lines a statement must not contain: those of `fixed` not in `broken` and those of
// `broken` not in `fixed`, whitespace-collapsed, of at least 6 non-space characters.
std::vector<std::string> LeakLines(std::string_view fixed, std::string_view broken);

// Words of at least 4 characters of the failing tests' names (after "::") and messages, lower
// case, common ones (test, assert, error, ...) and numbers left out: a statement about the
// problem names one of them.
std::set<std::string> SubjectWords(const StatementRequest& r);

// OK, or FailedPrecondition saying why the statement cannot be used: cut at the token limit,
// shorter than 40 non-space characters, longer than 4000 characters, none of `subject_words`
// in it (when there are any), or a leak line in it (whitespace collapsed).
absl::Status CheckStatement(std::string_view statement, std::string_view finish_reason,
                            const std::vector<std::string>& leak_lines, const std::set<std::string>& subject_words);

struct StatementOutcome {
  std::string statement;  // the model's, checked; empty: use the deterministic statement
  std::string reply;      // what the model answered (empty when the request failed)
  std::string reason;     // why it was refused, or "no leak (N lines checked)"
  double seconds = 0;
};

StatementOutcome WriteStatement(const SynthModel& model, const StatementRequest& request);

}  // namespace flotilla::synth
