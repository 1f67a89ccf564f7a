// TrialResult: one trial of an eval job (a task tried once by one agent against one model),
// as its result.json holds it, with the token counts taken from its trajectory.
//
//   {"task": "hello-file", "agent": "mini", "model": "flotilla-default", "attempt": 2,
//    "reward": 1.0, "status": "OK", "error_type": "", "detail": "...", "seconds": 3.2,
//    "steps": 4, "trajectory_id": "sess-...", "trajectory_store": "/.../trajectories.db",
//    "prompt_tokens": 812, "completion_tokens": 96, "turns": 4, "tokens_exact": true}
//
// error_type is "" (the trial ran to a reward) or one of env_build_failed, agent_timeout,
// agent_error, verifier_timeout, verifier_error, sandbox_crashed. status is the trajectory's
// status name without its prefix ("" when no trajectory was made).
//
// Pure values and functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/proto/trajectory.pb.h"
#include "nlohmann/json.hpp"

namespace flotilla::eval {

// What the model read and wrote in one trial.
//   turns              the model's replies (assistant turns)
//   completion_tokens  tokens the model generated
//   prompt_tokens      the context of every reply summed: for each reply, the tokens before it
//                      in its segment (what an API bills as prompt tokens, call by call)
//   exact              true when counted from the token record; false when the trajectory has
//                      text only (an external endpoint) and the counts are the endpoint's own
//                      usage figures, kept in the trajectory's metrics (worker/remote_chat.h)
struct TrialTokens {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int turns = 0;
  bool exact = true;
};

TrialTokens CountTrialTokens(const v1::Trajectory& trajectory);

struct TrialResult {
  std::string task;
  std::string agent;
  std::string model;
  int attempt = 0;
  double reward = 0;
  std::string status;
  std::string error_type;
  std::string detail;
  double seconds = 0;
  int steps = 0;
  std::string trajectory_id;     // "" when no trajectory was made (env_build_failed)
  std::string trajectory_store;  // the SQLite file holding it
  TrialTokens tokens;
};

// The trial folder's name: "<task>__<agent>__<attempt>".
std::string TrialName(const std::string& task, const std::string& agent, int attempt);

// True for the error types above; "" is not an error type.
bool IsErrorType(const std::string& type);

nlohmann::json TrialResultToJson(const TrialResult& trial);
// Errors are InvalidArgument naming `file` and the field: "<file>: reward: expected a number".
// Fields absent from results written before token counts existed read as 0.
absl::StatusOr<TrialResult> TrialResultFromJson(const nlohmann::json& j, const std::string& file);

}  // namespace flotilla::eval
