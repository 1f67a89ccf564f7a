// A job folder as `flotilla eval` leaves it: config.json, one folder per trial
// ("<task>__<agent>__<attempt>", trial_result.h) holding result.json, the job's result.json
// (job_summary.h) and report.html (report_html.h). Reading it back: the trials' results, and
// their trajectories out of the trajectory store(s) their results name.
//
// Thread-safety: functions are independent; a job still being written may be read while a
// trial's result.json is replaced (results are written whole, by rename).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/proto/trajectory.pb.h"

namespace flotilla::eval {

// Every trial folder's result.json, in folder-name order (folders without one are skipped).
// NotFound when `job_dir` has no config.json; InvalidArgument naming the file and field for a
// result.json that is not a trial's result.
absl::StatusOr<std::vector<TrialResult>> LoadTrialResults(const std::string& job_dir);

// Calls `fn` with each trial's trajectory (trials without one, such as env_build_failed, are
// skipped), read from the store its result.json names; returns how many. NotFound naming the
// trial's result.json and its trajectory_id when the store does not hold it.
absl::StatusOr<int64_t> ForEachJobTrajectory(const std::string& job_dir,
                                             const std::function<absl::Status(const TrialResult&,
                                                                              const v1::Trajectory&)>& fn);

}  // namespace flotilla::eval
