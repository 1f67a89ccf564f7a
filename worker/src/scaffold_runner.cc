// The task run around an agent: sandbox, environment files, agent, tests, reward, trajectory.
#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/external_agent.h"
#include "scaffold_agents.h"

namespace flotilla::worker {

namespace {

// The image's ENV (with the usual PATH, HOME and TERM under it) for a built environment.
void SetTaskEnv(const TerminalTask& task, v1::ExecRequest* req) {
  if (task.env.empty()) return;
  auto& env = *req->mutable_env();
  env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env["HOME"] = "/root";
  env["TERM"] = "dumb";
  for (const auto& [k, v] : task.env) env[k] = v;
}

}  // namespace

absl::StatusOr<ExecOutcome> RunCommand(AgentContext& ctx, const std::string& command) {
  int64_t left = ctx.deadline_ms - ctx.options.clock->NowMillis();
  v1::ExecRequest req;
  req.set_sandbox_id(ctx.sandbox_id);
  req.add_argv("bash");
  req.add_argv("-lc");
  req.add_argv(command);
  req.set_cwd(ctx.task.workdir);
  SetTaskEnv(ctx.task, &req);
  req.set_timeout_ms(static_cast<uint32_t>(std::clamp<int64_t>(left, 1, ctx.options.command_timeout_ms)));
  req.set_output_limit_bytes(1 << 20);
  if (ctx.user.has_value()) RunAsUser(*ctx.user, &req);
  return ctx.sandbox.Exec(req);
}

std::string Observation(const ExecOutcome& out, uint32_t limit) {
  std::string text = out.output;
  if (text.size() > limit) {
    text = absl::StrCat(text.substr(0, limit / 2), "\n[... ", text.size() - limit, " bytes elided ...]\n",
                        text.substr(text.size() - limit / 2));
  }
  std::string note;
  if (out.reason == v1::TIMEOUT) note = "\n[the command timed out and was killed]";
  return absl::StrCat("<returncode>", out.exit_code, "</returncode>\n<output>\n", text, note, "</output>");
}

namespace {

constexpr int kAgentCliPort = 8000;  // the in-sandbox endpoint an agent CLI is pointed at

absl::Status CopyFiles(SandboxClient& sandbox, const std::string& id,
                       const std::map<std::string, std::string>& files) {
  for (const auto& [path, content] : files) {
    bool script = path.size() > 3 && path.substr(path.size() - 3) == ".sh";
    RETURN_IF_ERROR(sandbox.PutFile(id, path, content, script ? 0755 : 0644));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExecOutcome> RunAsRoot(SandboxClient& sandbox, const std::string& id,
                                      const std::vector<std::string>& argv) {
  v1::ExecRequest req;  // in "/": the working directory may not exist yet
  req.set_sandbox_id(id);
  for (const std::string& a : argv) req.add_argv(a);
  req.set_timeout_ms(30'000);
  return sandbox.Exec(req);
}

// The image's USER resolved against its own /etc/passwd and /etc/group; the log folders
// become the user's (as under Harbor, where the agent and the tests write /logs).
absl::StatusOr<std::optional<ImageUser>> PrepareUser(SandboxClient& sandbox, const std::string& id,
                                                     const TerminalTask& task) {
  if (IsRootUser(task.user)) return std::optional<ImageUser>();
  absl::StatusOr<std::string> passwd = sandbox.GetFile(id, "/etc/passwd", 1 << 20);
  if (!passwd.ok()) return Annotate(passwd.status(), absl::StrCat("USER ", task.user, ": reading /etc/passwd"));
  absl::StatusOr<std::string> group = sandbox.GetFile(id, "/etc/group", 1 << 20);
  ASSIGN_OR_RETURN(ImageUser u, ResolveImageUser(task.user, *passwd, group.ok() ? *group : ""));
  ASSIGN_OR_RETURN(ExecOutcome own, RunAsRoot(sandbox, id, {"chown", "-R", absl::StrCat(u.uid, ":", u.gid), "/logs"}));
  if (own.exit_code != 0) {
    return absl::InternalError(absl::StrCat("giving /logs to USER ", task.user, ": ", own.output));
  }
  return std::optional<ImageUser>(u);
}

// Whether the sandbox, not the tests' verdict, ended a test run.
bool KilledBySandbox(v1::StopReason r) {
  switch (r) {
    case v1::OOM:
    case v1::PIDS:
    case v1::POLICY:
    case v1::SANDBOX_DIED:
    case v1::SANDBOX_BROKEN:
    case v1::NODE_LOST:
    case v1::DESTROYED:
    case v1::DISK_FULL:
      return true;
    default:
      return false;
  }
}

// Runs the tests in the sandbox; the reward per the task's layout. Tests the sandbox killed are
// an error (Aborted) with the stop reason in `killed`.
absl::StatusOr<double> RunTests(AgentContext& ctx, std::string* detail, v1::StopReason* killed) {
  RETURN_IF_ERROR(CopyFiles(ctx.sandbox, ctx.sandbox_id, ctx.task.test_files));
  v1::ExecRequest req;
  req.set_sandbox_id(ctx.sandbox_id);
  for (const std::string& a : ctx.task.test_command) req.add_argv(a);
  req.set_cwd(ctx.task.workdir);
  req.set_timeout_ms(ctx.task.test_timeout_ms);
  req.set_output_limit_bytes(1 << 20);
  SetTaskEnv(ctx.task, &req);
  (*req.mutable_env())["TEST_DIR"] = "/tests";
  (*req.mutable_env())["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  (*req.mutable_env())["HOME"] = "/root";
  if (ctx.user.has_value()) RunAsUser(*ctx.user, &req);
  ASSIGN_OR_RETURN(ExecOutcome out, ctx.sandbox.Exec(req));
  if (KilledBySandbox(out.reason)) {
    *killed = out.reason;
    return absl::AbortedError(absl::StrCat("the tests were stopped by the sandbox: ", v1::StopReason_Name(out.reason),
                                           out.detail.empty() ? "" : absl::StrCat(" (", out.detail, ")")));
  }
  *detail = absl::StrCat("tests exited ", out.exit_code,
                         out.reason == v1::TIMEOUT ? " (timed out)" : "");
  if (ctx.task.reward_file.empty()) return out.exit_code == 0 ? 1.0 : 0.0;
  absl::StatusOr<std::string> text = ctx.sandbox.GetFile(ctx.sandbox_id, ctx.task.reward_file, 4096);
  if (text.ok()) return ParseReward(*text);
  if (!ctx.task.reward_json_file.empty()) {
    absl::StatusOr<std::string> json = ctx.sandbox.GetFile(ctx.sandbox_id, ctx.task.reward_json_file, 1 << 20);
    if (json.ok()) return ParseRewardJson(*json, ctx.task.reward_json_file);
  }
  *detail += absl::StrCat("; no reward file: ", text.status().message());
  return 0.0;
}

// A real agent CLI in the task's sandbox, with the task's environment under the CLI's own.
absl::StatusOr<AgentOutcome> RunCliAgent(AgentContext& ctx) {
  const ExternalAgentSpec& spec = *ctx.options.agent_cli;
  v1::ExecRequest task_env;
  SetTaskEnv(ctx.task, &task_env);
  std::map<std::string, std::string> env(task_env.env().begin(), task_env.env().end());
  const int64_t left = ctx.deadline_ms - ctx.options.clock->NowMillis();
  ASSIGN_OR_RETURN(AgentCliOutcome out,
                   RunAgentCliInSandbox(ctx.sandbox, ctx.sandbox_id, ctx.session_id, ctx.options.worker_port, spec,
                                        ctx.task.instruction, ctx.task.workdir,
                                        static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX)), env,
                                        kAgentCliPort));
  AgentOutcome outcome;
  outcome.end = out.reason == v1::TIMEOUT ? AgentOutcome::End::kTimeout : AgentOutcome::End::kSubmitted;
  outcome.steps = out.connections;
  outcome.detail = absl::StrCat(spec.name, " exited ", out.exit_code);
  // Why the sandbox stopped it (the memory limit, the pids limit, ...), when it did.
  if (out.reason != v1::STOP_REASON_NONE && out.reason != v1::TIMEOUT) {
    absl::StrAppend(&outcome.detail, " (", v1::StopReason_Name(out.reason), ")");
  }
  outcome.exit_code = out.exit_code;
  outcome.output = std::move(out.output);
  return outcome;
}

absl::Status RunReference(AgentContext& ctx) {
  RETURN_IF_ERROR(ctx.sandbox.PutFile(ctx.sandbox_id, "/solution/solve.sh", ctx.task.solution_script, 0755));
  ASSIGN_OR_RETURN(ExecOutcome out, RunCommand(ctx, "bash /solution/solve.sh"));
  // The reference must not stay where the tests could find it (root removes it: the task's
  // user may not own /).
  ASSIGN_OR_RETURN(ExecOutcome rm, RunAsRoot(ctx.sandbox, ctx.sandbox_id, {"rm", "-rf", "/solution"}));
  if (rm.exit_code != 0) {
    return absl::InternalError(absl::StrCat("removing /solution after the reference ran: ", rm.output));
  }
  if (out.exit_code != 0) {
    FLOG(warn, "reference solution failed", {{"task", ctx.task.name}, {"exit", out.exit_code}});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScaffoldResult> RunScaffold(ChatService& service, SandboxClient& sandbox,
                                           const TerminalTask& task, const ScaffoldOptions& options) {
  const bool cli = options.agent == "cli";
  if (cli && (options.agent_cli == nullptr || options.worker_port <= 0)) {
    return absl::InvalidArgumentError("agent: 'cli' needs agent_cli and the worker's HTTP port (worker_port)");
  }
  if (!cli && options.scaffold != "single-turn" && options.scaffold != "mini" &&
      options.scaffold != "terminal") {
    return absl::InvalidArgumentError(absl::StrCat("scaffold: unknown '", options.scaffold,
                                                   "' (built in: single-turn, mini, terminal)"));
  }
  if (!cli && options.agent != "model" && options.agent != "reference" && options.agent != "none") {
    return absl::InvalidArgumentError(absl::StrCat("agent: unknown '", options.agent,
                                                   "' (model, reference, none or cli)"));
  }
  const std::string scaffold = cli ? options.agent_cli->name : options.scaffold;
  if (options.agent == "reference" && task.solution_script.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task.name, ": no reference solution"));
  }
  v1::CreateRequest create;
  // An agent CLI reaches the worker through its sandbox's own loopback (each sandbox has its own
  // network namespace): "no-network" denies loopback too, and the scheduler's CreateSandbox
  // carries no per-sandbox allow rules, so such a trial runs under "default" (loopback only).
  create.set_policy_name(cli && options.policy_name == "no-network" ? "default" : options.policy_name);
  create.set_image(task.image);
  uint32_t cpu_request = options.cpu_request_millicores;
  if (task.cpus > 0) {
    const auto limit = static_cast<uint32_t>(task.cpus * 1000);
    create.mutable_resources()->set_cpu_quota_millicores(limit);
    cpu_request = std::min(cpu_request, limit);
  }
  create.mutable_resources()->set_cpu_request_millicores(cpu_request);
  if (task.memory_bytes > 0) {
    create.mutable_resources()->set_memory_bytes(task.memory_bytes);
  } else if (cli && options.agent_cli->memory_bytes > 0) {
    create.mutable_resources()->set_memory_bytes(options.agent_cli->memory_bytes);
  }
  if (task.disk_bytes > 0) create.mutable_resources()->set_disk_bytes(task.disk_bytes);
  (*create.mutable_labels())["flotilla.task"] = task.name;
  (*create.mutable_labels())["flotilla.scaffold"] = scaffold;
  ScaffoldResult result;
  const int64_t create_start = options.clock->NowMicros();
  absl::StatusOr<std::string> created = sandbox.Create(create);
  result.sandbox_create_ms = static_cast<double>(options.clock->NowMicros() - create_start) / 1000.0;
  if (!created.ok()) return Annotate(created.status(), "creating the sandbox");
  const std::string sandbox_id = *created;

  v1::Trajectory header = options.header;
  header.set_task(task.name);
  header.set_scaffold(scaffold);
  header.set_sandbox_id(sandbox_id);
  if (!options.experiment.empty()) header.set_experiment(options.experiment);
  header.set_start_unix_ms(options.clock->WallMillis());
  std::string session = service.OpenSession(header, options.session_id);
  AgentContext ctx{service, sandbox, task, options, session, sandbox_id,
                   options.clock->NowMillis() + task.agent_timeout_ms, std::nullopt};

  result.sandbox_id = sandbox_id;
  result.trajectory_id = session;
  auto finish = [&](absl::Status error) -> absl::StatusOr<ScaffoldResult> {
    if (!error.ok()) {
      // A generation cancelled under it (its rollout stopping) interrupts the episode; it did
      // not fail. It is recorded all the same, with the reason.
      result.status = absl::IsCancelled(error) ? v1::INTERRUPTED : v1::FAILED;
      result.detail = std::string(error.message());
    }
    const int64_t destroy_start = options.clock->NowMicros();
    if (options.release) {
      options.release(sandbox_id);
    } else if (absl::Status destroyed = sandbox.Destroy(sandbox_id); !destroyed.ok()) {
      // A sandbox that cannot be destroyed now is left to its node's cleanup; the run's result
      // stands, so it is said here rather than returned.
      FLOG(warn, "sandbox not destroyed", {{"sandbox", sandbox_id}, {"error", std::string(destroyed.message())}});
    }
    result.sandbox_destroy_ms = static_cast<double>(options.clock->NowMicros() - destroy_start) / 1000.0;
    std::map<std::string, double> metrics = {{"turns", result.steps},
                                             {"tool_calls", result.commands},
                                             {"sandbox_create_ms", result.sandbox_create_ms},
                                             {"sandbox_destroy_ms", result.sandbox_destroy_ms}};
    auto traj = service.CloseSession(session, result.status, result.reward, result.detail, result.repercussion,
                                     metrics);
    if (!traj.ok()) return traj.status();
    result.trajectory = std::move(*traj);
    return result;
  };
  // A built environment has its files from the Dockerfile; otherwise they are copied to /app.
  absl::Status st = task.image.empty() ? CopyFiles(sandbox, sandbox_id, task.environment_files) : absl::OkStatus();
  if (st.ok()) {
    auto made = RunAsRoot(sandbox, sandbox_id, {"mkdir", "-p", task.workdir, "/logs/verifier", "/logs/agent"});
    if (!made.ok()) {
      st = made.status();
    } else if (made->exit_code != 0) {
      st = absl::InternalError(absl::StrCat("creating /app in the sandbox: ", made->output));
    }
  }
  if (st.ok()) {
    absl::StatusOr<std::optional<ImageUser>> user = PrepareUser(sandbox, sandbox_id, task);
    if (user.ok()) {
      ctx.user = *user;
    } else {
      st = user.status();
    }
  }
  if (!st.ok()) return finish(st);

  AgentOutcome agent;
  if (options.agent == "reference") {
    st = RunReference(ctx);
  } else if (options.agent == "model" || cli) {
    absl::StatusOr<AgentOutcome> out = cli                                 ? RunCliAgent(ctx)
                                       : options.scaffold == "single-turn" ? RunSingleTurnAgent(ctx)
                                       : options.scaffold == "mini"        ? RunMiniAgent(ctx)
                                                                           : RunToolAgent(ctx);
    if (out.ok()) {
      agent = *out;
    } else {
      st = out.status();
    }
  }
  if (!st.ok()) return finish(st);
  result.steps = agent.steps;
  result.commands = agent.commands;
  result.agent_output = std::move(agent.output);
  if (agent.end == AgentOutcome::End::kSandboxBroken) {
    result.status = v1::CRASHED;
    result.repercussion = agent.repercussion;
    result.detail = absl::StrCat("the sandbox broke during the agent's turn: ", agent.detail);
    return finish(absl::OkStatus());
  }
  std::string test_detail;
  absl::StatusOr<double> reward = RunTests(ctx, &test_detail, &result.repercussion);
  if (!reward.ok()) return finish(reward.status());
  result.reward = *reward;
  result.status = agent.end == AgentOutcome::End::kTimeout ? v1::TIMED_OUT
                  : agent.exit_code != 0                    ? v1::FAILED
                                                            : v1::OK;
  const char* ends[] = {"submitted", "step limit", "agent timeout", "context window full", "sandbox broken"};
  result.detail = absl::StrCat("agent: ", options.agent == "model" ? ends[static_cast<int>(agent.end)] : options.agent,
                               " after ", agent.steps, " steps; ", test_detail);
  if (!agent.detail.empty()) absl::StrAppend(&result.detail, "; ", agent.detail);
  return finish(absl::OkStatus());
}

}  // namespace flotilla::worker
