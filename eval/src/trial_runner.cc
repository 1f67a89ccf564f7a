#include "flotilla/eval/trial_runner.h"

#include <chrono>
#include <thread>

#include "flotilla/eval/job_summary.h"

namespace flotilla::eval {

bool IsBuiltInAgent(const std::string& agent) {
  return agent == "oracle" || agent == "nop" || agent == "mini" || agent == "terminal";
}

worker::ScaffoldOptions AgentScaffoldOptions(const std::string& agent, worker::ScaffoldOptions base) {
  base.scaffold = agent == "terminal" ? "terminal" : "mini";
  base.agent = agent == "oracle" ? "reference" : agent == "nop" ? "none" : "model";
  return base;
}

std::string TrialErrorType(const absl::StatusOr<worker::ScaffoldResult>& r) {
  if (!r.ok()) return "agent_error";
  if (r->status == v1::CRASHED) return "sandbox_crashed";
  if (r->status == v1::TIMED_OUT) return "agent_timeout";
  if (r->status == v1::FAILED) {
    return r->detail.find("reward") != std::string::npos ? "verifier_error" : "agent_error";
  }
  if (r->detail.find("tests exited") != std::string::npos && r->detail.find("(timed out)") != std::string::npos) {
    return "verifier_timeout";
  }
  return "";
}

absl::StatusOr<worker::ScaffoldResult> RunScaffoldWhenThereIsRoom(worker::ChatService& service,
                                                                  worker::SandboxClient& sandboxes,
                                                                  const worker::TerminalTask& task,
                                                                  const worker::ScaffoldOptions& options,
                                                                  const std::function<bool()>& stopped) {
  auto res = worker::RunScaffold(service, sandboxes, task, options);
  // A sandbox is placed only where there is room (the node did not admit it, or every scale
  // unit is full until a finished trial's sandbox is gone): a trial refused for now waits.
  while (!res.ok() && absl::IsResourceExhausted(res.status()) && !(stopped && stopped())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    res = worker::RunScaffold(service, sandboxes, task, options);
  }
  return res;
}

TrialRun RunTrial(worker::ChatService& service, worker::SandboxClient& sandboxes, worker::TrajectoryStore* store,
                  const worker::TerminalTask& task, const TrialRunOptions& o) {
  TrialRun run;
  TrialResult& r = run.result;
  r.task = task.name;
  r.agent = o.agent;
  r.attempt = o.attempt;
  r.model = AgentUsesModel(o.agent) ? service.ModelName() : "";
  const auto t0 = std::chrono::steady_clock::now();
  worker::ScaffoldOptions so = AgentScaffoldOptions(o.agent, o.scaffold);
  if (o.agent_cli != nullptr) {
    so.agent = "cli";
    so.agent_cli = o.agent_cli;
    so.worker_port = o.worker_port;
  }
  auto res = RunScaffoldWhenThereIsRoom(service, sandboxes, task, so, o.stopped);
  r.error_type = TrialErrorType(res);
  if (res.ok()) {
    r.reward = res->reward;
    r.detail = res->detail;
    r.status = v1::TrajectoryStatus_Name(res->status);
    r.trajectory_id = res->trajectory_id;
    run.agent_output = std::move(res->agent_output);
    if (store != nullptr) {
      r.trajectory_store = store->path();
      if (auto traj = store->Get(res->trajectory_id); traj.ok()) r.tokens = CountTrialTokens(*traj);
    }
    r.steps = res->steps;
  } else {
    r.detail = std::string(res.status().message());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace flotilla::eval
