// ModelRewriter: SWE-smith-style task candidates written by a model. A function is picked
// (Python: listed with the environment's python3 `ast` by synth/scripts/py_functions.py; C:
// function definitions found with TokenizeC), the model (synth_model.h) is asked to rewrite it
// with one subtle bug, the code block of its reply is taken, re-indented and checked to parse
// where the project lives (Python: ast.parse; C: the compiler's -fsyntax-only, or balanced
// braces when the file does not compile on its own), and the result becomes a SourceEdit of the
// whole function: a candidate (source "model rewrite", kind "rewrite") that goes through the same
// validation, write and probe stages as a procedural mutation. A reply that cannot be used is
// kept with its reason (no code block, cut at the token limit, another function, unchanged, too
// long, does not parse, the request failed).
//
//   auto shell = SandboxShell(*sandbox);
//   ASSIGN_OR_RETURN(auto fns, ListFunctions(*shell, "python", repo, files, &skipped));
//   for (const RewriteOutcome& r : ProposeRewrites(model, *shell, "python", repo, fns, {})) ...
//
// Not thread-safe (one shell); the prompts are the constants below.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/synth/c_mutator.h"
#include "synth_model.h"
#include "test_sandbox.h"

namespace flotilla::synth {

extern const char kRewriteSystemPrompt[];

// Where the project's tree is (root(): "/app" in the synthesizer's base sandbox), a folder for
// scratch files (scratch(): "/tmp" there) and commands run on them with the project's tools
// (python3, cc; bash).
class ProjectShell {
 public:
  virtual ~ProjectShell() = default;
  virtual std::string root() const = 0;
  virtual std::string scratch() const = 0;
  virtual absl::Status Put(const std::string& path, const std::string& content) = 0;
  virtual absl::StatusOr<ShellRun> Run(const std::string& script, uint32_t timeout_ms) = 0;
};

// The synthesizer's base sandbox as a ProjectShell (borrowed; it outlives the result).
std::unique_ptr<ProjectShell> SandboxShell(TestSandbox& sandbox);

struct FunctionSpan {
  std::string file;    // relative to the repository
  std::string name;
  int line = 0;        // of its `def` / its name
  size_t start = 0;    // byte offsets of the whole function in the file
  size_t end = 0;
  std::string indent;  // the first line's indentation (Python methods)
};

// C function definitions of `source`: a top-level `name ( ... ) {...}`, from the line of the
// first token after the previous top-level `;` or `}` to the closing brace.
std::vector<FunctionSpan> CFunctions(const std::string& file, std::string_view source);

// The functions of `files` (relative to repo_dir on this machine, and to shell.root()); a file
// that does not parse is appended to *skipped with the parser's message.
absl::StatusOr<std::vector<FunctionSpan>> ListFunctions(ProjectShell& shell, const std::string& language,
                                                        const std::string& repo_dir,
                                                        const std::vector<std::string>& files,
                                                        std::vector<std::string>* skipped);

// The user turn asking for `function_source` (dedented) rewritten with one subtle bug.
std::string RewritePrompt(const std::string& language, const FunctionSpan& fn, std::string_view function_source);

// The text inside the reply's first fenced block (``` with an optional language tag); nullopt
// when there is none or it is not closed.
std::optional<std::string> FencedCode(std::string_view reply);

// The reply as an edit replacing the function in `source`; FailedPrecondition with the reason
// it cannot be used (the checks above that need no parser).
absl::StatusOr<SourceEdit> RewriteEdit(const std::string& language, const FunctionSpan& fn, std::string_view source,
                                       std::string_view reply, std::string_view finish_reason);

// A shell command exiting 0 when `path` (a copy of the repository's `file`) parses.
std::string ParseCheckCommand(const std::string& language, const std::string& root, const std::string& file,
                              const std::string& path);

struct RewriteOutcome {
  FunctionSpan function;
  std::string reply;    // the model's text (empty when the request failed)
  bool usable = false;
  std::string reason;   // why it is not usable, or what was checked
  SourceEdit edit;      // when usable
  double seconds = 0;   // the model's time
};

struct RewriteOptions {
  int max_functions = 20;       // asked at most, picked at random (seed)
  uint64_t seed = 1;
  uint32_t check_timeout_ms = 60'000;
  int max_request_errors = 3;   // in a row: the endpoint is taken as down, the rest not asked
};

// One outcome per function asked.
std::vector<RewriteOutcome> ProposeRewrites(const SynthModel& model, ProjectShell& shell, const std::string& language,
                                            const std::string& repo_dir, const std::vector<FunctionSpan>& functions,
                                            const RewriteOptions& options);

}  // namespace flotilla::synth
