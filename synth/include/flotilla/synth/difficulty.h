// Difficulty (stage 7 of `flotilla synth`): the solve rate of the configured policy over N
// attempts per task, each attempt a trial run through eval's trial runner
// (eval/trial_runner.h) as `flotilla eval -p TASK -a AGENT -k N` runs it, in the task's own
// built environment (eval/task_environment.h).
//
//   DifficultyOptions d{.agent = "mini", .attempts = 4, .band = DifficultyBand{0.1, 0.9}};
//   d.policy = &worker.service();
//   d.store = &worker.store();
//   ASSIGN_OR_RETURN(DifficultySummary s, MeasureDifficulty(d, out, *state, builder, sandboxes, progress));
//
// The policy is the agent (oracle, nop, mini, terminal) and, for mini and terminal, the model
// the service serves: "oracle", "nop" or "mini@MODEL". An attempt is solved when its reward is
// at least 1 (eval's pass); the solve rate is solved / attempts. Labels:
//   easy      solve rate >= 0.7
//   medium    0.3 <= solve rate < 0.7
//   hard      0 < solve rate < 0.3
//   unsolved  solve rate 0
//   unknown   not measured (no policy configured, or an attempt ended in a platform error)
// An attempt that runs out of time (agent_timeout) counts as unsolved: the policy had its time.
// The other error types (env_build_failed, agent_error, sandbox_crashed, verifier_error,
// verifier_timeout) are the platform's, not the policy's: such a task stays unknown with the
// errors as the reason, and a rerun tries those attempts again.
//
// Kept in: synth.db's difficulty table (per task and policy) and a decision per measurement
// and per move; task.toml ([metadata] difficulty = LABEL, Harbor's field, and a
// [synth.difficulty] table: solve_rate, attempts, solved, label, policy, reason, band); each
// trial's result.json (eval/trial_result.h) under <out>/.work/difficulty/<policy>/<trial>/.
// Resumable: a task whose row for this policy has at least `attempts` attempts is not tried
// again; a trial with a result.json that counts is not run again (an interrupted task resumes
// at its next attempt; a larger `attempts` adds to the earlier ones).
//
// The band LO:HI (inclusive) filters: a measured task whose solve rate lies outside it is moved
// to <out>/excluded/<task>/, where `flotilla eval -p OUT` and experiments (source: OUT), which
// read only OUT's own task folders, do not look; a task there that a later run's band takes in
// comes back. Moved, never deleted: its measurement cost N agent runs, another band may want it,
// and the folder with its task.toml is the record of why it left. Without a band nothing moves.
//
// Thread-safety: one MeasureDifficulty per output folder at a time; its trials run
// `concurrency` at a time.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/environments/env_builder.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/synth/synth_state.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::synth {

struct DifficultyBand {
  double lo = 0;
  double hi = 1;
};

struct DifficultyOptions {
  std::string agent;   // oracle, nop, mini or terminal; empty: difficulty is not measured
  int attempts = 4;    // per task; 0: not measured
  std::optional<DifficultyBand> band;
  int concurrency = 1;  // trials at once
  // max_steps, max_tokens, temperature, seed (each trial adds its own offset); the experiment
  // name of the trajectories is "synth-difficulty".
  worker::ScaffoldOptions scaffold;
  worker::ChatService* policy = nullptr;     // borrowed: the service of the served model; required
  worker::TrajectoryStore* store = nullptr;  // borrowed: its store (token counts); may be null
};

struct DifficultySummary {
  std::string policy;
  int tasks = 0;      // task folders found (OUT's and excluded/'s)
  int measured = 0;   // measured in this run
  int resumed = 0;    // measured before, not tried again
  int unknown = 0;    // left unmeasured (errors), with their reasons
  int trials = 0;     // trials run in this run
  int excluded = 0;   // in excluded/ after this run (measured by this policy)
  std::map<std::string, int> labels;  // label -> tasks, over every measured task
  std::string report;                 // one line
};

// The options' own checks (before anything runs): a known agent, attempts >= 0, concurrency >= 1.
// InvalidArgument naming the flag.
absl::Status CheckDifficultyOptions(const DifficultyOptions& options);

// The label of a solve rate (above); "unknown" when attempts is 0.
std::string DifficultyLabel(int solved, int attempts);

// Whether an attempt measures the policy: it ran to a reward, or ran out of the agent's time.
bool AttemptCounts(const eval::TrialResult& attempt);

// A task's row from its attempts: solved (reward >= 1) of those that count, the label, the
// reason. FailedPrecondition, listing them, when an attempt ended in a platform error (the task
// stays unknown) or none ran.
absl::StatusOr<DifficultyRow> SummarizeAttempts(const std::string& task, const std::string& policy,
                                                const std::vector<eval::TrialResult>& attempts);

// "LO:HI" with 0 <= LO <= HI <= 1; errors name --difficulty-band.
absl::StatusOr<DifficultyBand> ParseDifficultyBand(std::string_view text);

// task.toml's text with [metadata] difficulty set to the row's label (added when [metadata]
// has none), synth's "difficulty_reason" line gone, and a [synth.difficulty] table (replacing an
// earlier one) holding the row and `band` (what the band decided).
std::string TaskTomlWithDifficulty(const std::string& toml, const DifficultyRow& row, const std::string& band);

// Measures the task folders of `out_dir` and of `out_dir`/excluded (folders with task.toml or
// task.yaml) not yet measured for this policy, records them in `state`, and applies the band.
// Errors: bad options (InvalidArgument), a task in both places (FailedPrecondition), state or
// file errors; a task that cannot be loaded or built is left unknown with its reason.
absl::StatusOr<DifficultySummary> MeasureDifficulty(const DifficultyOptions& options, const std::string& out_dir,
                                                    SynthState& state, environments::EnvBuilder& builder,
                                                    worker::SandboxClient& sandboxes,
                                                    const std::function<void(std::string_view)>& progress);

// `flotilla synth --difficulty-only --out DIR`: MeasureDifficulty over an existing folder of
// tasks (synthesized or not), its state in DIR/synth.db (created when missing).
absl::StatusOr<DifficultySummary> MeasureFolderDifficulty(const DifficultyOptions& options, const std::string& out_dir,
                                                          const environments::EnvBuilderOptions& builder,
                                                          worker::SandboxClient& sandboxes,
                                                          const std::function<void(std::string_view)>& progress);

}  // namespace flotilla::synth
