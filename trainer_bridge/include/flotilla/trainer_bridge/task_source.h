// Task sources: where a dataset's prompts come from.
//
//   builtin:arith?ops=+-&max=9      a op b with operands 0..max ("7+5=" -> "12"); &split=train or
//                                   &split=heldout: only questions with (a + 2b) mod 5 != 0, or
//                                   only those with == 0 (a fixed fifth held out for evaluation)
//   builtin:copy?len=4&alphabet=abc  repeat a string ("abca" -> "abca")
//   builtin:lookup?files=4&max=99&add=0&look=100&via=echo&split=all
//                                   agentic: "Write the number in /app/data/c.txt to
//                                   /app/answer.txt." The number (0..max) is only in that file of
//                                   the sample's sandbox, so the agent must read it with a command.
//                                   files (1..26): the file is one of a.txt.. the files-th letter;
//                                   add (0..1000): when > 0 the instruction asks for the number plus
//                                   k (1..add, given in it); split=train|heldout: only tasks with
//                                   (value + 2 file + 3 k) mod 5 != 0, or only those with == 0
//                                   (needs max >= 4). Every task fills `terminal` in memory (the
//                                   file, a test that writes reward 1 when /app/answer.txt holds
//                                   exactly the answer, else 0, a solution script) and its
//                                   reference_steps (cat the file; echo the answer into
//                                   /app/answer.txt), from which worker::ReferenceTurnExamples
//                                   renders the warm-start examples of a whole episode.
//                                   look (0..100): the percent of reference episodes that use the
//                                   file; the others list /app/data and write a guess in
//                                   0..max+add (a mixed demonstrator for the warm start; the task
//                                   and its test are the same). via=cp (needs add=0): the ones that
//                                   use the file list /app/data and copy it to /app/answer.txt
//                                   with cp instead of reading it and writing the number.
//   <file>.jsonl                     one {"id", "prompt", "answer"} object per line
//   <folder>                         a Terminal-Bench task folder (task.toml or task.yaml), or
//                                    a folder of them: each Task carries its TerminalTask. A
//                                    folder of tasks is drawn in passes: every task once per
//                                    pass, each pass in a new order (from the seed), so a short
//                                    run meets every task of a small folder.
//
// Every task runs as a worker episode in its own sandbox (SandboxTaskOf). A prompt-only task's
// tests never see `answer` for arith and copy: they recompute the truth from the prompt inside
// the sample's sandbox; `answer` is the reference for supervised warm starts (and the truth of
// a JSONL task).
//
// Thread-safe: Next takes an internal lock; a source is deterministic for a given seed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::trainer_bridge {

struct Task {
  std::string id;
  std::string family;   // "arith", "copy", "lookup", "file"
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

// Readies a folder task before any sample runs it: builds its environment from its Dockerfile
// and sets `image`, `workdir`, `env` and `user` (and may stack an agent CLI's layers on it).
// The application supplies it (it owns the environment builder); its error names the task.
using TaskPreparer = std::function<absl::Status(worker::TerminalTask*)>;

class TaskSource {
 public:
  virtual ~TaskSource() = default;
  // `source` as in the file comment; `seed` makes the order reproducible. `prepare`, when
  // set, is called once for every task of a folder source as it opens (prompt-only families
  // need no environment); its error is the source's.
  static absl::StatusOr<std::unique_ptr<TaskSource>> Open(const std::string& source, uint64_t seed,
                                                          const TaskPreparer& prepare = nullptr);
  virtual Task Next() = 0;
  [[nodiscard]] virtual std::string family() const = 0;
};

}  // namespace flotilla::trainer_bridge
