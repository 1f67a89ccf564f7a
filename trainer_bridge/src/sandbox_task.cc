// A prompt-only task as a sandbox task: the truth is recomputed by a test script in the
// sample's own sandbox.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/worker/scaffold.h"

namespace flotilla::trainer_bridge {
namespace {

// Tabs and newlines become blanks (a field is one line); then the text is a single-quoted
// shell word.
std::string ShellWord(const std::string& s) {
  std::string one_line = s;
  for (char& c : one_line) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return absl::StrCat("'", absl::StrReplaceAll(one_line, {{"'", "'\\''"}}), "'");
}

constexpr char kCheck[] = R"SH(
resp=$(tr '\t\r\n' '   ' < "$RESPONSE" 2>/dev/null | sed 's/^ *//; s/ *$//')
verdict() {
  case "$family" in
    arith)
      e=${prompt%=}
      case "$e" in ''|*[!0-9+*-]*) return 1 ;; esac
      # In a subshell: a malformed expression ("1+", "08") is a wrong answer, not a script error.
      truth=$( (echo $(( $e ))) 2>/dev/null ) || return 1
      ;;
    copy) truth=${prompt#copy } ;;
    file) truth=$reference ;;
    *) return 1 ;;
  esac
  [ "$resp" = "$truth" ]
}
mkdir -p /logs/verifier
if verdict; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
)SH";

}  // namespace

worker::TerminalTask SandboxTaskOf(const Task& task) {
  if (!task.terminal.name.empty()) return task.terminal;
  worker::TerminalTask t;
  t.name = task.id;
  t.layout = worker::TerminalTask::Layout::kTerminalBench2;
  t.instruction = task.prompt;
  t.agent_timeout_ms = 600'000;
  t.test_timeout_ms = 30'000;
  // A shell, sed and tr: a small sandbox, so that a whole in-flight bound of them is admitted.
  t.memory_bytes = 64ull << 20;
  t.test_files["/tests/test.sh"] =
      absl::StrCat("#!/bin/sh\n# The truth of this ", task.family, " task, recomputed from its prompt.\n",
                   "RESPONSE=", worker::kSingleTurnResponsePath, "\nfamily=", ShellWord(task.family),
                   "\nprompt=", ShellWord(task.prompt), "\nreference=", ShellWord(task.answer), kCheck);
  t.test_command = {"/bin/sh", "/tests/test.sh"};
  t.reward_file = "/logs/verifier/reward.txt";
  return t;
}

}  // namespace flotilla::trainer_bridge
