// The trials of an eval job (eval_job.h) and how one model's trials run: a platform of the
// embedded default serving that model, its trials N at a time, each in its own sandbox of the
// task's built environment (with an agent CLI's layers on top for the CLIs), each result
// written to "<job>/<trial>/result.json" as it ends.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "eval_job.h"
#include "flotilla/common/progress.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/worker/terminal_task.h"
#include "nlohmann/json.hpp"
#include "stop_signal.h"

namespace flotilla::cli {

struct Trial {
  size_t task = 0;   // index into the tasks
  size_t model = 0;  // index into the job's models (0 for the agents that use none)
  std::string agent;
  int attempt = 0;
  std::string name;  // the trial folder's name (eval/trial_result.h, eval/job_models.h)
  std::optional<eval::TrialResult> result;  // empty until it ran (or was found done)
};

// The job's built environments: a task whose environment did not build, and per task x agent
// CLI the task with the CLI's layers on top (or why they could not be added).
struct JobEnvironments {
  std::map<size_t, std::string> build_errors;
  std::map<std::pair<size_t, std::string>, worker::TerminalTask> cli_tasks;
  std::map<std::pair<size_t, std::string>, std::string> cli_errors;
};

// The job's one progress bar (or one line per trial when stderr is not a terminal), over every
// model's trials.
struct JobProgress {
  ProgressBar* bar = nullptr;
  size_t total = 0;
  size_t finished = 0;
};

// Writes `j` to `path` whole (a temporary file renamed over it).
absl::Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& j);

// Runs the trials of model `model` still without a result (and those of the agents that use no
// model when `model` is 0) on a platform started with `worker`, `f.concurrency` at a time, until
// done or `stop` arrives; sets each trial's result and writes it. Returns the model's served name.
// Errors: the platform does not start, an agent CLI is not installed (NotFound).
absl::StatusOr<std::string> RunModelTrials(const EvalJobFlags& f, const app::EmbeddedWorkerOptions& worker,
                                           size_t model, const std::vector<worker::TerminalTask>& tasks,
                                           const JobEnvironments& envs, const std::string& job_dir,
                                           std::vector<Trial>* trials, JobProgress* progress, const StopSignal& stop);

// Trajectory id -> transcript (eval/report_html.h) for the trials whose store holds theirs.
std::map<std::string, std::string> JobTranscripts(const std::vector<eval::TrialResult>& trials);

}  // namespace flotilla::cli
