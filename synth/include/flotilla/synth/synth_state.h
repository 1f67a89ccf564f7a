// SynthState: the SQLite state of one `flotilla synth` output folder (<out>/synth.db).
//
// Tables: stages (a stage's result, written once it completes, so a rerun skips it),
// decisions (every accept/reject with its reason, in order), candidates (one per synthesized
// bug: its edit, its state and the reason it reached that state, fail-to-pass and
// pass-to-pass lists, seconds spent), difficulty (a task's solve rate by one policy, once
// measured: difficulty.h). A rerun of `flotilla synth` on the same folder resumes:
// completed stages and candidates in a final state are not done again.
//
// Thread-safety: one writer (the synthesizer); the Database serializes statements.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/common/sqlite.h"

namespace flotilla::synth {

// Candidate states: generated -> (rejected | validated) -> (rejected | valid).
struct CandidateRow {
  std::string id;           // "<kind>-<file hash>-<offset>": stable across reruns
  std::string source;       // "mutation" (commit mining and model rewrites would add theirs)
  std::string kind;         // flip_compare, ...
  std::string file;         // relative to the repository
  int line = 0;
  int64_t start = 0;
  int64_t end = 0;
  std::string replacement;
  std::string description;
  std::string state = "generated";
  std::string reason;
  std::string fail_to_pass;  // newline-separated test ids
  std::string pass_to_pass;
  std::string messages;      // newline-separated "id: message" of failing tests
  double seconds = 0;
};

struct DecisionRow {
  double unix_seconds = 0;
  std::string stage;
  std::string subject;
  std::string decision;
  std::string reason;
};

// A task's measured difficulty under one policy ("oracle", "nop", "mini@MODEL", ...).
struct DifficultyRow {
  std::string task;      // the task folder's name
  std::string policy;
  int attempts = 0;      // attempts that counted (difficulty.h says which)
  int solved = 0;        // of them, reward >= 1
  double solve_rate = 0;
  std::string label;     // easy, medium, hard, unsolved
  std::string reason;
  double seconds = 0;    // the trials' wall time, summed
};

class SynthState {
 public:
  static absl::StatusOr<std::unique_ptr<SynthState>> Open(const std::string& path);

  // A stage's recorded result (JSON text) once it is complete; nullopt before.
  absl::StatusOr<std::optional<std::string>> StageResult(const std::string& stage);
  absl::Status CompleteStage(const std::string& stage, const std::string& result, double seconds);
  // Seconds spent in each completed stage, by stage.
  absl::StatusOr<std::vector<std::pair<std::string, double>>> StageSeconds();

  absl::Status Decide(const std::string& stage, const std::string& subject, const std::string& decision,
                      const std::string& reason);
  absl::StatusOr<std::vector<DecisionRow>> Decisions();

  // Inserts candidates not already there (by id); existing rows keep their state.
  absl::Status AddCandidates(const std::vector<CandidateRow>& rows);
  absl::Status UpdateCandidate(const CandidateRow& row);
  absl::StatusOr<std::vector<CandidateRow>> Candidates();

  // The task's row for `policy`; nullopt when not measured.
  absl::StatusOr<std::optional<DifficultyRow>> Difficulty(const std::string& task, const std::string& policy);
  absl::Status SetDifficulty(const DifficultyRow& row);  // inserts or replaces (task, policy)
  absl::StatusOr<std::vector<DifficultyRow>> Difficulties();  // every row, by task then policy

 private:
  explicit SynthState(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
};

}  // namespace flotilla::synth
