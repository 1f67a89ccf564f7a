// Task sources: where a dataset's prompts come from.
//
//   builtin:arith?ops=+-&max=9      a op b with operands 0..max ("7+5=" -> "12"); &split=train or
//                                   &split=heldout: only questions with (a + 2b) mod 5 != 0, or
//                                   only those with == 0 (a fixed fifth held out for evaluation)
//   builtin:copy?len=4&alphabet=abc  repeat a string ("abca" -> "abca")
//   <file>.jsonl                     one {"id", "prompt", "answer"} object per line
//   <folder>                         a Terminal-Bench task folder (task.toml or task.yaml), or
//                                    a folder of them: each Task carries its TerminalTask
//
// Every task runs as a worker episode in its own sandbox (SandboxTaskOf). A prompt-only task's
// tests never see `answer` for arith and copy: they recompute the truth from the prompt inside
// the sample's sandbox; `answer` is the reference for supervised warm starts (and the truth of
// a JSONL task).
//
// Thread-safe: Next takes an internal lock; a source is deterministic for a given seed.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::trainer_bridge {

struct Task {
  std::string id;
  std::string family;   // "arith", "copy", "file"
  std::string prompt;   // the user message
  std::string answer;   // the reference answer
  // The sandbox task a scaffold works on (instruction, files placed before the agent starts,
  // tests run in the sample's own sandbox afterwards). Empty name: a prompt-only task.
  worker::TerminalTask terminal;
};

// The sandbox task a sample runs: `task.terminal` when set; otherwise the prompt as the
// instruction and, as the tests, a script that reads the reply the single-turn scaffold wrote
// (worker::kSingleTurnResponsePath), recomputes the truth from the prompt (arith: the
// expression, copy: the text after "copy "; file: the reference answer) and writes 1 or 0 to
// /logs/verifier/reward.txt. The reply is compared as an exact string once tabs and newlines
// are blanks and surrounding blanks are trimmed; it is never evaluated.
worker::TerminalTask SandboxTaskOf(const Task& task);

class TaskSource {
 public:
  virtual ~TaskSource() = default;
  // `source` as in the file comment; `seed` makes the order reproducible.
  static absl::StatusOr<std::unique_ptr<TaskSource>> Open(const std::string& source, uint64_t seed);
  virtual Task Next() = 0;
  [[nodiscard]] virtual std::string family() const = 0;
};

}  // namespace flotilla::trainer_bridge
