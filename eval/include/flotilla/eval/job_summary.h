// JobSummary: the result.json of an eval job, from its trials' results. The dashboard's eval
// view reads it (GET /api/eval_jobs) and report.html is rendered from it.
//
//   {"model": M, "models": [M, ...], "k": K, "tasks": N, "trials": T, "errors": E, "pass@1": X,
//    "pass@k": Y, "prompt_tokens": P, "completion_tokens": C,
//    "agents": {COLUMN: {"agent", "model", "tasks", "trials", "errors", "mean_reward",
//                        "reward_stderr", "pass@1", "pass@K", "prompt_tokens", "completion_tokens",
//                        "turns_mean"}},
//    "per_task": {TASK: {COLUMN: {"trials", "passed", "pass_rate", "mean_reward", "errors"}}},
//    "trial_results": [TrialResult as result.json holds it, in job order]}
//
// A COLUMN is one agent x model: the agent's name in a job of one model and for the agents that
// use no model (oracle, nop); "AGENT@MODEL" for every other agent when the job has several
// models, so that the models stand side by side. A column's trials are those of its agent whose
// result names its model (any model for a plain agent-name column).
//
// A trial passes when its reward is at least 1. pass@1 and pass@k are the unbiased estimator
// (pass_at_k.h) per agent x task, averaged over tasks (per agent) and over agents x tasks (the
// job); a task with fewer than k finished trials counts its pass@n. Only trials that ran (have
// a result) count. Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "flotilla/eval/trial_result.h"
#include "nlohmann/json.hpp"

namespace flotilla::eval {

struct JobShape {
  std::vector<std::string> tasks;   // in job order
  std::vector<std::string> agents;  // in job order
  std::string model;                // the model every agent used ("" for oracle/nop-only jobs)
  std::vector<std::string> models;  // several models: the job's models in job order (else empty)
  int attempts = 1;                 // k
};

// False for the agents that use no model: oracle (the task's solution) and nop (nothing).
bool AgentUsesModel(const std::string& agent);

// The COLUMN key above: "AGENT@MODEL", or AGENT when `model` is empty.
std::string ColumnName(const std::string& agent, const std::string& model);

nlohmann::json SummarizeJob(const JobShape& shape, const std::vector<TrialResult>& trials);

}  // namespace flotilla::eval
