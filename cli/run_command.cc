// `flotilla run EXPERIMENT.yaml`: a whole RL experiment on the embedded default (app::
// EmbeddedPlatform: the scheduler and its in-process node agent, the engine, the one
// trajectory store, rollout controller and TrainerBridge in this process; every sample a
// worker episode in its own sandbox placed by the scheduler; with --scheduler ADDR that
// scheduler is a `flotilla scheduler` placing on its `flotilla node` agents, the same code
// with a remote endpoint), plus the Python trainer as a
// child, with a live progress line and a final summary whose last line is
//   run: reward_start=A reward_end=B steps=N minutes=M scaffold=NAME turns_mean=T tool_calls_mean=C sandboxes=S
// SIGINT or SIGTERM stops it in order: dispatch stops and no further batch goes to the trainer,
// samples in flight finish and are stored, the trainer child is terminated, the summary is
// printed, and the exit status is 130 or 143 (a second signal skips the wait). The unfinished
// run can be resumed. When the trainer ends on its own, the samples in flight are stored the
// same way, so every dispatched sample has a record (summary: dispatched_samples).
// Task folder datasets run in their built environments (--env-store; the same builds and cache
// as `flotilla eval`), and `scaffold: pi` runs the CLI from --agents-dir in each sample's
// sandbox as read-only layers over the task's environment.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "stop_signal.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/progress.h"
#include "flotilla/common/status.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/merge/merge.h"
#include "flotilla/trainer_bridge/experiment.h"
#include "task_environment.h"
#include "trainer_process.h"

namespace flotilla::cli {
namespace {

constexpr int64_t kDrainTimeoutMs = 20'000;
constexpr int kTrainerGraceMs = 5'000;

struct RunFlags {
  std::string experiment;
  bool fresh = false;
  bool resume = false;
  bool no_trainer = false;
  std::string backend = "cpu";
  int engine_threads = 1;
  int trainer_threads = 1;
  std::string listen;
  std::string http;    // the dashboard and /metrics; empty: none
  std::string scheduler;  // an external `flotilla scheduler`; empty: the embedded one
  double minutes = 0;  // 0: the experiment's own limits
  std::string env_store = "/var/lib/flotilla";
  std::string agents_dir = "var/agents";
};

std::vector<std::string> TrainerArgv(const trainer_bridge::ExperimentConfig& cfg, const std::string& address,
                                     const RunFlags& f) {
  if (!cfg.trainer.command.empty()) return cfg.trainer.command;
  const auto& t = cfg.trainer;
  std::vector<std::string> argv = {"/usr/bin/python3", "-m", "flotilla_trainer.train",
                                   "--bridge", address,
                                   "--out", (std::filesystem::path(cfg.state_dir) / "weights").string(),
                                   "--loss", t.loss,
                                   "--seed", absl::StrCat(cfg.policy.seed),
                                   "--sft-steps", absl::StrCat(t.sft_steps),
                                   "--sft-lr", absl::StrCat(t.sft_learning_rate),
                                   "--rl-steps", absl::StrCat(t.rl_steps),
                                   "--lr", absl::StrCat(t.learning_rate),
                                   "--clip-eps", absl::StrCat(t.clip_eps),
                                   "--kl-coef", absl::StrCat(t.kl_coef),
                                   "--ppo-epochs", absl::StrCat(t.ppo_epochs),
                                   "--minibatches", absl::StrCat(t.minibatches),
                                   "--publish-every", absl::StrCat(t.publish_every),
                                   "--threads", absl::StrCat(f.trainer_threads),
                                   "--teacher-steps", absl::StrCat(t.teacher_steps),
                                   "--lr-schedule", t.lr_schedule,
                                   "--init", cfg.policy.init};
  double limit_s = f.minutes > 0 ? f.minutes * 60 : static_cast<double>(t.time_limit_ms) / 1000.0;
  if (limit_s > 0) {
    argv.push_back("--time-limit-s");
    argv.push_back(absl::StrCat(limit_s));
  }
  return argv;
}

absl::Status PrepareStateDir(const trainer_bridge::ExperimentConfig& cfg, const RunFlags& f) {
  namespace fs = std::filesystem;
  fs::path db = fs::path(cfg.state_dir) / "trajectories.db";
  if (!fs::exists(db) || f.resume) return absl::OkStatus();
  bool finished = true;
  {
    auto store = trainer_bridge::ExperimentStore::Open(db.string(), cfg.name);
    if (store.ok()) {
      auto fin = (*store)->Finished();
      finished = !fin.ok() || *fin;
    }
  }
  if (!f.fresh && !finished) {
    std::cerr << "run: resuming the unfinished experiment in " << cfg.state_dir << " (--fresh starts over)\n";
    return absl::OkStatus();
  }
  // The run's records move aside; the sandbox runtime's directory stays (it may hold mounts a
  // killed run left, which the runtime cleans up when it opens).
  fs::path prev = fs::path(cfg.state_dir + ".prev");
  std::error_code ec;
  fs::remove_all(prev, ec);
  if (fs::exists(prev)) prev = fs::path(absl::StrCat(cfg.state_dir, ".prev-", ::time(nullptr)));
  fs::create_directories(prev, ec);
  for (const auto& entry : fs::directory_iterator(cfg.state_dir, ec)) {
    if (entry.path().filename() == "sandbox") continue;
    fs::rename(entry.path(), prev / entry.path().filename(), ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("moving the previous run aside: ", ec.message()));
  }
  return absl::OkStatus();
}

int Run(const RunFlags& f) {
  auto wall = std::chrono::steady_clock::now();
  // Installed before any thread starts, so SIGINT/SIGTERM only record themselves.
  StopSignal stop;
  auto cfg = trainer_bridge::LoadExperimentConfig(f.experiment);
  if (!cfg.ok()) {
    std::cerr << "run: " << cfg.status().message() << "\n";
    return 2;
  }
  if (auto s = PrepareStateDir(*cfg, f); !s.ok()) {
    std::cerr << "run: " << s.message() << "\n";
    return 1;
  }
  // policy.init: merge:CONFIG.yaml: the merge is made first, into the run's folder, and the
  // trainer starts from it.
  if (cfg->policy.init.starts_with("merge:")) {
    std::string out = (std::filesystem::path(cfg->state_dir) / "merged-init").string();
    std::cerr << "run: merging " << cfg->policy.init.substr(6) << " into " << out << "\n";
    auto merged = merge::ResolveMergeInit(cfg->policy.init, out);
    if (!merged.ok()) {
      std::cerr << "run: " << merged.status().message() << "\n";
      return 2;
    }
    cfg->policy.init = *merged;
  }
  app::PlatformOptions po = app::ExperimentPlatformOptions(*cfg);
  if (auto images = SetExperimentEnvironments(*cfg, f.env_store, f.agents_dir, &po.experiment_options); images.ok()) {
    po.image_dir = *images;
  } else {
    std::cerr << "run: " << images.status().message() << "\n";
    return 2;
  }
  po.worker.engine.backend = f.backend;
  po.worker.engine.threads = f.engine_threads;
  po.scheduler_address = f.scheduler;
  po.experiment_options.listen = f.listen;
  po.worker.http_address = f.http;
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "run: " << platform.status().message() << "\n";
    return 1;
  }
  trainer_bridge::Experiment* const exp = (*platform)->experiment();
  if (!f.http.empty()) {
    std::cerr << "run: dashboard on http://" << (*platform)->worker().http_address() << "/ (metrics at /metrics)\n";
  }
  std::optional<TrainerProcess> trainer;
  if (!f.no_trainer) {
    std::string pypath = absl::StrCat((std::filesystem::path(FlotillaSourceDir()) / "trainer_bridge" / "python").string());
    std::string stubs = (std::filesystem::path(FlotillaBinaryDir()) / "trainer_bridge" / "python").string();
    auto p = TrainerProcess::Spawn(TrainerArgv(*cfg, exp->address(), f),
                                   {{"PYTHONPATH", pypath}, {"FLOTILLA_PROTO_PY", stubs}, {"PYTHONUNBUFFERED", "1"}});
    if (!p.ok()) {
      std::cerr << "run: trainer: " << p.status().message() << "\n";
      return 1;
    }
    trainer.emplace(std::move(*p));
  } else {
    std::cerr << "run: bridge at " << exp->address() << "; waiting for a trainer (Ctrl-C stops)\n";
  }
  // A bar over the RL steps on a terminal; a plain line every 10 s otherwise.
  ProgressBar bar({.label = "run", .total = cfg->trainer.rl_steps, .fd = STDOUT_FILENO, .plain_interval_s = 0});
  const bool tty = bar.tty();
  uint64_t last_samples = 0;
  auto last_t = std::chrono::steady_clock::now();
  auto last_print = last_t - std::chrono::seconds(100);
  int trainer_exit = 0;
  while (stop.received() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (stop.received() != 0) break;
    if (trainer) {
      if (auto code = trainer->Poll(); code) {
        trainer_exit = *code;
        break;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last_print < (tty ? std::chrono::milliseconds(500) : std::chrono::milliseconds(10'000))) continue;
    auto p = exp->Progress();
    auto cs = exp->ControllerStatsNow();
    auto rs = exp->RunnerStatsNow();
    double dt = std::chrono::duration<double>(now - last_t).count();
    double rate = dt > 0 ? static_cast<double>(rs.samples_completed - last_samples) / dt : 0;
    last_samples = rs.samples_completed;
    last_t = now;
    last_print = now;
    double minutes = std::chrono::duration<double>(now - wall).count() / 60;
    std::string line = absl::StrFormat(
        "version=%d reward=%.3f staleness=%.2f stale_masked=%d samples/s=%.1f in_flight=%d "
        "samples=%d minutes=%.1f%s",
        p.policy_version, rs.recent_reward, p.mean_staleness, p.stale_masked_total, rate, cs.in_flight,
        rs.samples_completed, minutes, p.model_loaded ? "" : " (warm start)");
    if (tty) {
      bar.Update(static_cast<uint64_t>(std::max<int64_t>(0, p.step)), line);
    } else {
      std::cout << absl::StrFormat("step=%d ", p.step) << line << std::endl;
    }
  }
  if (tty) bar.Finish();
  if (stop.received() != 0) {
    // Orderly stop: no new prompts or batches, samples in flight are stored, the trainer goes.
    std::cerr << "run: " << (stop.received() == SIGINT ? "SIGINT" : "SIGTERM")
              << ": stopping dispatch and the trainer, storing samples in flight (again to skip)\n";
    auto second_signal = [&] { return stop.count() > 1; };
    bool drained = exp->Drain(kDrainTimeoutMs, second_signal);
    trainer_exit = trainer ? trainer->Terminate(kTrainerGraceMs) : 0;
    if (!drained) std::cerr << "run: samples still in flight were not stored\n";
  } else {
    // The trainer is done (its detach parked the rollouts): the samples still in flight resume,
    // finish and are stored all the same, so every dispatched sample has a record (a signal
    // now skips the wait).
    if (absl::Status s = exp->runner().Reload(); !s.ok()) std::cerr << "run: resuming the rollouts: " << s << "\n";
    if (!exp->Drain(kDrainTimeoutMs, [&] { return stop.received() != 0; })) {
      std::cerr << "run: samples still in flight were not stored\n";
    }
  }
  auto summary = exp->Summary();
  bool finished = trainer_exit == 0 && stop.received() == 0;
  if (finished) (void)exp->MarkFinished();
  exp->Stop();
  double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count() / 60;
  if (!summary.ok()) {
    std::cerr << "run: summary: " << summary.status().message() << "\n";
    return 1;
  }
  auto p = exp->Progress();
  std::cout << absl::StrFormat("summary: experiment=%s samples=%d steps=%d final_version=%d stale_masked_tokens=%d "
                               "trainer_exit=%d",
                               cfg->name, summary->samples, summary->steps, p.policy_version, p.stale_masked_total,
                               trainer_exit)
            << "\n";
  for (const auto& [k, v] : p.trainer_metrics) std::cout << "summary: trainer." << k << "=" << v << "\n";
  // Every dispatched sample is stored (a failed one with its reason): none lost.
  std::cout << absl::StrFormat("summary: dispatched_samples=%d failed_samples=%d",
                               exp->ControllerStatsNow().groups_dispatched * cfg->rollout.group_size, summary->failed)
            << "\n";
  {
    // What a sandbox per sample costs this run: create + destroy over the episodes' wall time.
    const trainer_bridge::RunnerStats rs = exp->RunnerStatsNow();
    const double n = std::max<double>(1, static_cast<double>(rs.sandboxes));
    std::cout << absl::StrFormat("summary: sandbox_ms_per_sample=%.2f episode_ms_per_sample=%.2f sandbox_overhead_frac=%.4f",
                                 rs.sandbox_ms / n, rs.sandboxed_episode_ms / n,
                                 rs.sandboxed_episode_ms > 0 ? rs.sandbox_ms / rs.sandboxed_episode_ms : 0.0)
              << "\n";
  }
  std::cout << absl::StrFormat(
                   "run: reward_start=%.3f reward_end=%.3f steps=%d minutes=%.1f scaffold=%s turns_mean=%.2f "
                   "tool_calls_mean=%.2f sandboxes=%d",
                   summary->reward_start, summary->reward_end, summary->steps, minutes, summary->scaffold,
                   summary->turns_mean, summary->tool_calls_mean, summary->sandboxes)
            << std::endl;
  if (stop.received() != 0) return stop.exit_code();
  return trainer_exit == 0 ? 0 : 1;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run an RL experiment from its YAML (bridge, engine, a sandbox per sample, trainer)");
  run->add_option("experiment", flags->experiment, "experiment YAML")->required();
  run->add_flag("--fresh", flags->fresh, "start over even if an unfinished run is in the state directory");
  run->add_flag("--resume", flags->resume, "resume the run in the state directory");
  run->add_flag("--no-trainer", flags->no_trainer, "do not start the Python trainer (attach one yourself)");
  run->add_option("--backend", flags->backend, "engine backend: cpu or cuda");
  run->add_option("--engine-threads", flags->engine_threads, "engine CPU threads");
  run->add_option("--trainer-threads", flags->trainer_threads, "PyTorch threads of the trainer");
  run->add_option("--listen", flags->listen, "TrainerBridge address (default: trainer.address)");
  run->add_option("--http", flags->http, "serve the dashboard and Prometheus /metrics here (HOST:PORT; port 0: any)");
  run->add_option("--minutes", flags->minutes, "stop RL after this many minutes");
  run->add_option("--scheduler", flags->scheduler,
                  "place every sample's sandbox through this `flotilla scheduler` (HOST:PORT) and its "
                  "`flotilla node` agents instead of the embedded scheduler and node");
  run->add_option("--env-store", flags->env_store, "where task environments are built (flotilla env)")
      ->capture_default_str();
  run->add_option("--agents-dir", flags->agents_dir, "agent CLIs for scaffold: pi (scripts/test-deps.d/agent-clis.sh)")
      ->capture_default_str();
  run->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace flotilla::cli
