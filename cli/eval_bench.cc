// `flotilla bench eval`: environment builds and eval-job throughput over examples/tasks.
//
//   flotilla bench eval [--tasks DIR] [--store DIR] [-n N] [--cold]
//
// Prints name=value lines:
//   eval.env_build_cached_s   one environment built again from the cache (the slowest of the
//                             folder's tasks, each built once first)
//   eval.env_build_cold_s     (--cold) hello-file's environment in an empty store: debootstrap
//                             of the base included; minutes, so only when asked
//   eval.trials_per_min       oracle over the folder's tasks at -n N, environments cached
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_format.h"
#include "commands.h"
#include "eval_job.h"
#include "flotilla/worker/terminal_task.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

struct EvalBenchFlags {
  std::string tasks = "examples/tasks";
  std::string store = "/var/lib/flotilla";
  int concurrency = 8;
  bool cold = false;
};

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int RunEvalBench(const EvalBenchFlags& f) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(f.tasks, ec)) {
    if (fs::exists(e.path() / "task.toml") || fs::exists(e.path() / "task.yaml")) dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) {
    std::cerr << "flotilla bench eval: --tasks " << f.tasks << ": no task folders\n";
    return 2;
  }
  double cached = 0;
  {
    environments::EnvBuilder builder(CliEnvBuilderOptions(f.store));
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::string& d : dirs) {
        auto task = worker::LoadTerminalTask(d);
        if (!task.ok()) {
          std::cerr << "flotilla bench eval: " << task.status().message() << "\n";
          return 1;
        }
        auto t0 = std::chrono::steady_clock::now();
        absl::Status s = PrepareTaskEnvironment(builder, &*task, nullptr);
        if (!s.ok()) {
          std::cerr << "flotilla bench eval: " << s.message() << "\n";
          return 1;
        }
        if (pass == 1) cached = std::max(cached, Seconds(t0));
      }
    }
  }
  std::cout << absl::StrFormat("eval.env_build_cached_s=%.4f\n", cached);
  if (f.cold) {
    std::string store = fs::absolute(f.store).string() + "-bench-cold";
    fs::remove_all(store, ec);
    environments::EnvBuilder builder(CliEnvBuilderOptions(store));
    auto task = worker::LoadTerminalTask(f.tasks + "/hello-file");
    if (!task.ok()) {
      std::cerr << "flotilla bench eval: --cold needs " << f.tasks << "/hello-file: " << task.status().message() << "\n";
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    absl::Status s = PrepareTaskEnvironment(builder, &*task, nullptr);
    double cold = Seconds(t0);
    fs::remove_all(store, ec);
    if (!s.ok()) {
      std::cerr << "flotilla bench eval: " << s.message() << "\n";
      return 1;
    }
    std::cout << absl::StrFormat("eval.env_build_cold_s=%.1f\n", cold);
  }
  EvalJobFlags job;
  job.paths = {f.tasks};
  job.agents = {"oracle"};
  job.concurrency = f.concurrency;
  job.env_store = f.store;
  std::string scratch = fs::temp_directory_path() / ("flotilla-bench-eval-" + std::to_string(::getpid()));
  job.jobs_dir = scratch + "/jobs";
  job.worker.state_dir = scratch + "/state";
  job.worker.experiment = "bench-eval";
  auto t0 = std::chrono::steady_clock::now();
  int rc = RunEvalJob(job);
  double s = Seconds(t0);
  fs::remove_all(scratch, ec);
  if (rc != 0) return rc;
  std::cout << absl::StrFormat("eval.trials=%d\neval.seconds=%.2f\neval.trials_per_min=%.1f\n", dirs.size(), s,
                               dirs.size() * 60.0 / s);
  return 0;
}

}  // namespace

void RegisterEvalBench(CLI::App& bench, int* exit_code) {
  auto f = std::make_shared<EvalBenchFlags>();
  CLI::App* ev = bench.add_subcommand("eval", "Environment builds and eval-job throughput over a task folder");
  ev->add_option("--tasks", f->tasks, "folder of task folders")->capture_default_str();
  ev->add_option("--store", f->store, "environment store")->capture_default_str();
  ev->add_option("-n,--concurrency", f->concurrency, "trials at once")->capture_default_str();
  ev->add_flag("--cold", f->cold, "also build hello-file into an empty store (debootstrap: minutes)");
  ev->callback([f, exit_code] { *exit_code = RunEvalBench(*f); });
}

}  // namespace flotilla::cli
