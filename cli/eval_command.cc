// `flotilla eval`: one model across harnesses on a folder of Terminal-Bench style tasks.
// (With -p or --resume it runs a Harbor-shaped job instead: eval_job.h.)
//
//   flotilla eval --tasks examples/tasks [--harness mini,terminal] [--tasks-per-harness N] [--agent model]
//
// For each harness (a built-in scaffold) the first N tasks of the folder, in name order, run
// in sandboxes of the embedded default (app::EmbeddedPlatform) against its engine; each run's trajectory (task,
// scaffold, reward, status) goes to the worker's trajectory store. Prints one line per run and
// one per harness:
//   eval: harness=mini task=hello-file reward=1 status=TRAJECTORY_STATUS_OK steps=2 trajectory=ID
//   eval: harness=mini tasks=3 passed=2 pass_rate=0.667
// A run passes when its reward is at least 1. Exit status: 0 when every run produced a
// trajectory (whatever it scored), 1 when one could not run, 2 for bad arguments. SIGINT or
// SIGTERM stops after the run in progress and prints the harness lines so far (exit 130/143).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "eval_job.h"
#include "task_environment.h"
#include "embedded_worker_flags.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/eval/trial_runner.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/terminal_task.h"
#include "stop_signal.h"

namespace flotilla::cli {
namespace {

struct EvalFlags {
  app::EmbeddedWorkerOptions worker;
  std::string tasks_dir;
  std::string harnesses = "mini,terminal";
  uint32_t tasks_per_harness = 0;  // 0: every task in the folder
  worker::ScaffoldOptions scaffold;
  uint64_t seed = 0;
  std::string env_store = "/var/lib/flotilla";
};

struct HarnessTally {
  int runs = 0;
  int passed = 0;
};

bool IsTaskFolder(const std::filesystem::path& p) {
  return std::filesystem::is_directory(p) &&
         (std::filesystem::exists(p / "task.toml") || std::filesystem::exists(p / "task.yaml"));
}

absl::StatusOr<std::vector<worker::TerminalTask>> LoadTasks(const std::string& dir, uint32_t limit) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--tasks: '", dir, "' is not a folder"));
  }
  std::vector<std::filesystem::path> folders;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (IsTaskFolder(e.path())) folders.push_back(e.path());
  }
  std::sort(folders.begin(), folders.end());
  if (limit > 0 && folders.size() > limit) folders.resize(limit);
  std::vector<worker::TerminalTask> tasks;
  for (const auto& f : folders) {
    auto t = worker::LoadTerminalTask(f.string());
    if (!t.ok()) return t.status();
    tasks.push_back(std::move(*t));
  }
  if (tasks.empty()) return absl::NotFoundError(absl::StrCat("--tasks: no task folders (task.toml or task.yaml) in '", dir, "'"));
  return tasks;
}

absl::StatusOr<std::vector<std::string>> ParseHarnesses(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view h : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::string name(h);
    if (name != "mini" && name != "terminal") {
      return absl::InvalidArgumentError(absl::StrCat("--harness: unknown harness '", name,
                                                     "' (built-in: mini, terminal)"));
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  if (out.empty()) return absl::InvalidArgumentError("--harness: at least one harness is required");
  return out;
}

int Eval(const EvalFlags& f) {
  if (f.tasks_dir.empty()) {
    std::cerr << "flotilla eval: --tasks DIR (built-in harnesses) or -p PATH (a job) is required\n";
    return 2;
  }
  StopSignal stop;
  auto harnesses = ParseHarnesses(f.harnesses);
  if (!harnesses.ok()) {
    std::cerr << "flotilla eval: " << harnesses.status().message() << "\n";
    return 2;
  }
  auto tasks = LoadTasks(f.tasks_dir, f.tasks_per_harness);
  if (!tasks.ok()) {
    std::cerr << "flotilla eval: " << tasks.status().message() << "\n";
    return 2;
  }
  {
    // Environments first: a task whose Dockerfile does not build fails before any model loads.
    environments::EnvBuilder builder(CliEnvBuilderOptions(f.env_store));
    for (worker::TerminalTask& task : *tasks) {
      absl::Status env = PrepareTaskEnvironment(builder, &task, [](std::string_view l) { std::cerr << l << "\n"; });
      if (!env.ok()) {
        std::cerr << "flotilla eval: " << env.message() << "\n";
        return 1;
      }
    }
  }
  app::PlatformOptions po;
  po.worker = f.worker;
  po.worker.http_address = "";
  po.image_dir = f.env_store;
  const app::EmbeddedWorkerOptions& wo = po.worker;
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "flotilla eval: " << platform.status().message() << "\n";
    return 1;
  }
  app::EmbeddedWorker* const w = &(*platform)->worker();
  worker::SandboxClient& sandbox = (*platform)->sandboxes();
  std::map<std::string, HarnessTally> tally;
  int failures = 0;
  uint64_t run_index = 0;
  for (const std::string& harness : *harnesses) {
    for (const worker::TerminalTask& task : *tasks) {
      if (stop.received() != 0) break;
      worker::ScaffoldOptions so = f.scaffold;
      so.scaffold = harness;
      so.experiment = wo.experiment;
      so.seed = f.seed + run_index++;
      // Harbor's names for the two fixed agents.
      if (so.agent == "oracle") so.agent = "reference";
      if (so.agent == "nop") so.agent = "none";
      auto r = eval::RunScaffoldWhenThereIsRoom(w->service(), sandbox, task, so,
                                                [&stop] { return stop.received() != 0; });
      if (!r.ok()) {
        ++failures;
        std::cout << "eval: harness=" << harness << " task=" << task.name << " error=\"" << r.status().message()
                  << "\"" << std::endl;
        continue;
      }
      HarnessTally& t = tally[harness];
      t.runs += 1;
      t.passed += r->reward >= 1.0 ? 1 : 0;
      std::cout << absl::StrFormat("eval: harness=%s task=%s reward=%g status=%s steps=%d trajectory=%s", harness,
                                   task.name, r->reward, v1::TrajectoryStatus_Name(r->status), r->steps,
                                   r->trajectory_id)
                << std::endl;
    }
  }
  for (const std::string& harness : *harnesses) {
    const HarnessTally& t = tally[harness];
    double rate = t.runs > 0 ? static_cast<double>(t.passed) / t.runs : 0.0;
    std::cout << absl::StrFormat("eval: harness=%s tasks=%d passed=%d pass_rate=%.3f", harness, t.runs, t.passed,
                                 rate)
              << std::endl;
  }
  std::cout << "eval: trajectories in " << w->store().path() << " (experiment " << wo.experiment << ")"
            << std::endl;
  if (stop.received() != 0) return stop.exit_code();
  return failures == 0 ? 0 : 1;
}

}  // namespace

void AddEvalCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EvalFlags>();
  auto job = std::make_shared<EvalJobFlags>();
  flags->worker.experiment = "eval";
  CLI::App* ev = app.add_subcommand("eval", "Evaluate one model across harnesses on a folder of tasks");
  AddEmbeddedWorkerFlags(ev, flags->worker, &job->models);
  ev->add_option("--tasks", flags->tasks_dir, "folder of Terminal-Bench style task folders (built-in harness mode)");
  ev->add_option("-p,--path", job->paths, "job mode: a task folder or a folder of tasks (repeatable)");
  ev->add_option("-a,--agent-name", job->agents,
                 "job mode: oracle, nop, mini, terminal, or the agent CLIs pi, codex, opencode, claude-code and "
                 "qwen-code (repeatable)");
  ev->add_option("--agents-dir", job->agents_dir,
                 "job mode: where the agent CLIs are installed (scripts/test-deps.d/agent-clis.sh)");
  ev->add_option("-k,--attempts", job->attempts, "job mode: trials per agent and task");
  ev->add_option("-n,--concurrency", job->concurrency, "job mode: trials running at once");
  ev->add_option("--cpu-request", job->cpu_request_millicores,
                 "job mode: CPU millicores each trial reserves at admission (the task's cpus stay its "
                 "limit; 0: its cpus)")
      ->capture_default_str();
  ev->add_option("--jobs-dir", job->jobs_dir, "job mode: where job folders go");
  ev->add_option("--http", job->http, "job mode: serve the dashboard and /metrics here (HOST:PORT; port 0: any)");
  ev->add_option("--job-name", job->job_name, "job mode: the job folder's name (default: the UTC time)");
  ev->add_option("--resume", job->resume, "job mode: a job folder; runs its unfinished and errored trials");
  ev->add_option("--filter-error", job->filter_errors,
                 "job mode, --resume: rerun only trials with these error types (repeatable)");
  ev->add_option("--harness", flags->harnesses, "comma-separated built-in harnesses: mini, terminal");
  ev->add_option("--tasks-per-harness", flags->tasks_per_harness, "first N tasks in name order (0: all)");
  ev->add_option("--agent", flags->scaffold.agent, "model, reference or oracle (the task's solution), none or nop (nothing)");
  ev->add_option("--max-steps", flags->scaffold.max_steps, "agent turns at most");
  ev->add_option("--max-tokens", flags->scaffold.max_tokens, "tokens per model turn");
  ev->add_option("--temperature", flags->scaffold.temperature, "sampling temperature");
  ev->add_option("--policy", flags->scaffold.policy_name, "sandbox policy name");
  ev->add_option("--env-store", flags->env_store, "where task environments are built (flotilla env)");
  ev->add_option("--seed", flags->seed, "sampling seed of the first run (each run adds its index)");
  ev->callback([flags, job, exit_code] {
    if (job->paths.empty() && job->resume.empty()) {
      if (job->models.size() > 1) {
        std::cerr << "flotilla eval: --tasks runs one model; several -m need a job (-p PATH)\n";
        *exit_code = 2;
        return;
      }
      if (!job->models.empty()) flags->worker.model_prefix = job->models[0];
      *exit_code = Eval(*flags);
      return;
    }
    job->worker = flags->worker;
    job->scaffold = flags->scaffold;
    job->env_store = flags->env_store;
    job->seed = flags->seed;
    *exit_code = RunEvalJob(*job);
  });
}

}  // namespace flotilla::cli
