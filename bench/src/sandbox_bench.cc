#include "flotilla/bench/sandbox_bench.h"

#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "child_process.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/sandbox/zygote_main.h"
#include "sandbox_cycle.h"
#include "idle_density.h"
#include "latency_stats.h"
#include "runc_bundle.h"

namespace flotilla::bench {
namespace fs = std::filesystem;
namespace {

constexpr int kWarmup = 5;

std::function<void(int)> Progress(const std::string& what, int n) {
  if (!::isatty(2)) return nullptr;
  return [what, n](int done) {
    if (done % 10 == 0 || done == n) std::fprintf(stderr, "\r%s: %d/%d%s", what.c_str(), done, n, done == n ? "\n" : "");
  };
}


// A few unmeasured warm-up cycles, then `n` sequential ones; prints <prefix>.* lines.
// `after_warmup` (may be null) runs between the two.
absl::Status MeasureSequential(const std::string& prefix, int n, const std::function<absl::Status(int, int)>& op,
                               LatencySummary* sequential, const std::function<void()>& after_warmup = nullptr) {
  LatencySummary warm;
  RETURN_IF_ERROR(RunTimed(kWarmup, 1, op, &warm));
  if (after_warmup) after_warmup();
  RETURN_IF_ERROR(RunTimed(n, 1, op, sequential, Progress(prefix + " sequential", n)));
  PrintSummary(prefix, *sequential);
  return absl::OkStatus();
}

// Sequential, then each concurrency level; prints <prefix>.* lines and returns the sequential
// summary and the last (highest) concurrency level's. `after_mode` (may be null) runs with
// ("", 0) after the warm-up and then after each mode with that mode's prefix ("sandbox",
// "sandbox.c2", ...) and its cycle count.
absl::Status MeasureModes(const std::string& prefix, const SandboxBenchOptions& o,
                          const std::function<absl::Status(int worker, int i)>& op, LatencySummary* sequential,
                          LatencySummary* concurrent,
                          const std::function<void(const std::string&, int)>& after_mode = nullptr) {
  RETURN_IF_ERROR(MeasureSequential(prefix, o.n, op, sequential, [&] {
    if (after_mode) after_mode("", 0);
  }));
  if (after_mode) after_mode(prefix, o.n);
  for (int c : o.concurrency) {
    LatencySummary s;
    RETURN_IF_ERROR(RunTimed(o.n, c, op, &s, Progress(absl::StrCat(prefix, " concurrency ", c), o.n)));
    PrintSummary(absl::StrCat(prefix, ".c", c), s);
    if (after_mode) after_mode(absl::StrCat(prefix, ".c", c), o.n);
    *concurrent = s;
  }
  std::printf("%s.per_s_concurrent=%.1f\n", prefix.c_str(), concurrent->per_s);
  return absl::OkStatus();
}

std::string SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The `flotilla` entry point users run, next to this binary (which may be flotilla-full, the
// binary with every command): the whole-process figure is that binary's.
std::string FlotillaEntryPoint() {
  std::string front = sandbox::SiblingExecutable("flotilla");
  return front.empty() ? SelfExecutable() : front;
}

}  // namespace

absl::Status RunSandboxBench(const SandboxBenchOptions& o) {
  if (o.n <= 0) return absl::InvalidArgumentError("--n: must be positive");
  // Always a fresh directory of our own, so removing it afterwards removes nothing else.
  ScratchDir scratch(fs::path(o.state_dir.empty() ? "/var/tmp" : o.state_dir) / NewId("flotilla-bench"));
  std::error_code ec;
  fs::create_directories(scratch.path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("--state-dir ", scratch.path().string(), ": ", ec.message()));

  // A node holds thousands of sandboxes, each with a few descriptors in the runtime (init's
  // control socket, pidfd, cgroup and BPF fds): lift the soft limit to the hard one, and the
  // hard one to the kernel's nr_open when running as root.
  struct rlimit nofile {};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  struct rlimit wide = {1u << 20, 1u << 20};
  if (::setrlimit(RLIMIT_NOFILE, &wide) == 0) nofile = wide;
  std::printf("sandbox.bench_nofile=%llu\n", static_cast<unsigned long long>(nofile.rlim_cur));

  sandbox::RuntimeOptions runtime_options;
  runtime_options.state_dir = (scratch.path() / "state").string();
  runtime_options.cgroup_prefix = "flotilla-bench";
  // This process has every component's libraries loaded: inits come from flotilla-zygote (or
  // the small `flotilla`) when it is installed here, as `flotilla node`'s do.
  runtime_options.zygote_binary = sandbox::SiblingZygoteExecutable();
  std::printf("sandbox.zygote=%s\n",
              runtime_options.zygote_binary.empty() ? "fork of this process" : runtime_options.zygote_binary.c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Runtime> runtime, sandbox::Runtime::Open(runtime_options));
  {
    sandbox::SandboxOptions probe_options;
    probe_options.policy_name = "default";
    ASSIGN_OR_RETURN(sandbox::CreateResult probe, runtime->Create(probe_options));
    RETURN_IF_ERROR(runtime->Destroy(probe.id));
    std::printf("sandbox.enforcers_active=%s\n", absl::StrJoin(probe.enforcers_active, ",").c_str());
    std::printf("sandbox.enforcers_inactive=%s\n", absl::StrJoin(probe.enforcers_inactive, "; ").c_str());
  }

  // The runtime as a node runs it: with a sandbox started ahead for the options asked for
  // (RuntimeOptions::start_ahead); how many Creates were handed one is printed per mode.
  LatencySummary sandbox_seq, sandbox_conc;
  std::atomic<int> started_ahead{0};
  RETURN_IF_ERROR(MeasureModes(
      "sandbox", o, [&](int, int) { return SandboxCycle(*runtime, &started_ahead); }, &sandbox_seq, &sandbox_conc,
      [&](const std::string& mode, int n) {
        if (n > 0) std::printf("%s.started_ahead_frac=%.3f\n", mode.c_str(), started_ahead.load() / double(n));
        started_ahead = 0;
      }));
  // The same cycle with nothing started ahead: every Create starts its sandbox.
  LatencySummary cold_seq;
  {
    sandbox::RuntimeOptions cold_options = runtime_options;
    cold_options.state_dir = (scratch.path() / "state-cold").string();
    cold_options.cgroup_prefix = "flotilla-bench-cold";
    cold_options.start_ahead = false;
    ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Runtime> cold, sandbox::Runtime::Open(cold_options));
    std::atomic<int> none{0};
    RETURN_IF_ERROR(MeasureSequential(
        "sandbox.cold", o.n, [&](int, int) { return SandboxCycle(*cold, &none); }, &cold_seq));
  }

  std::string runc = o.runc ? FindProgram("runc") : "";
  LatencySummary runc_seq, runc_conc;
  std::vector<std::unique_ptr<RuncBundle>> runc_bundles;
  if (o.runc && runc.empty()) {
    std::printf("runc.skipped=runc not found (scripts/install-deps.sh installs it)\n");
  } else if (o.runc) {
    // One bundle per worker, same image and limits as the sandbox's default policy.
    int workers = 1;
    for (int c : o.concurrency) workers = std::max(workers, c);
    std::vector<std::unique_ptr<RuncBundle>>& bundles = runc_bundles;
    for (int w = 0; w < workers; ++w) {
      RuncBundleOptions b;
      b.runc = runc;
      b.dir = (scratch.path() / absl::StrCat("runc-bundle-", w)).string();
      b.args = {"/bin/true"};
      b.memory_bytes = 4ull << 30;
      b.pids = 1024;
      ASSIGN_OR_RETURN(std::unique_ptr<RuncBundle> bundle, RuncBundle::Create(b));
      bundles.push_back(std::move(bundle));
    }
    std::string run_tag = NewId("bench");
    RETURN_IF_ERROR(MeasureModes(
        "runc", o, [&](int w, int i) { return bundles[w]->Run(absl::StrCat(run_tag, "-", w, "-", i)); },
        &runc_seq, &runc_conc));
    std::printf("sandbox.p50_vs_runc=%.3f\n", sandbox_seq.p50_ms / runc_seq.p50_ms);
    std::printf("sandbox.cold.p50_vs_runc=%.3f\n", cold_seq.p50_ms / runc_seq.p50_ms);
    std::printf("sandbox.per_s_concurrent_vs_runc=%.2f\n", sandbox_conc.per_s / runc_conc.per_s);
  }
  std::fflush(stdout);

  // The whole-process figure: `flotilla sandbox run` against `runc run`, each a fresh process
  // per sandbox, interleaved so both see the same machine load.
  if (o.cli_n > 0) {
    std::string flotilla = o.flotilla_binary.empty() ? FlotillaEntryPoint() : o.flotilla_binary;
    std::string tag = NewId("cli");
    std::vector<RuncBundle*> runc_bundle;
    if (!runc_bundles.empty()) runc_bundle.push_back(runc_bundles[0].get());
    std::vector<double> cli_ms, runc_ms;
    absl::Status s;
    auto timed = [](const std::function<absl::Status()>& f, std::vector<double>* into) {
      auto t0 = std::chrono::steady_clock::now();
      absl::Status st = f();
      into->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      return st;
    };
    auto progress = Progress("cli: sandbox run / runc run", o.cli_n);
    for (int i = -kWarmup; i < o.cli_n && s.ok(); ++i) {
      std::vector<double> cli_once, runc_once;
      s = timed([&] { return RunChild({flotilla, "sandbox", "run", "--", "/bin/true"}); }, &cli_once);
      if (s.ok() && !runc_bundle.empty()) {
        s = timed([&] { return runc_bundle[0]->Run(absl::StrCat(tag, "-", i + kWarmup)); }, &runc_once);
      }
      if (i < 0) continue;
      cli_ms.insert(cli_ms.end(), cli_once.begin(), cli_once.end());
      runc_ms.insert(runc_ms.end(), runc_once.begin(), runc_once.end());
      if (progress) progress(i + 1);
    }
    if (!s.ok()) {
      // The other figures still stand; say why this one is missing.
      std::printf("cli.error=%s\n", s.ToString().c_str());
    } else {
      std::sort(cli_ms.begin(), cli_ms.end());
      std::sort(runc_ms.begin(), runc_ms.end());
      std::printf("cli.sandbox_run.p50_ms=%.3f\ncli.sandbox_run.p99_ms=%.3f\n", Percentile(cli_ms, 0.5),
                  Percentile(cli_ms, 0.99));
      if (!runc_ms.empty()) {
        std::printf("cli.runc_run.p50_ms=%.3f\ncli.runc_run.p99_ms=%.3f\n", Percentile(runc_ms, 0.5),
                    Percentile(runc_ms, 0.99));
        std::printf("cli.p50_vs_runc=%.3f\n", Percentile(cli_ms, 0.5) / Percentile(runc_ms, 0.5));
      }
    }
  }
  std::fflush(stdout);

  if (o.idle_target > 0) {
    ASSIGN_OR_RETURN(IdleDensity d, MeasureIdleDensity(*runtime, o.idle_target));
    std::printf("sandbox.idle_target=%d\n", o.idle_target);
    std::printf("sandbox.idle_count=%d\n", d.count);
    if (!d.stopped_by.empty()) std::printf("sandbox.idle_stopped_by=%s\n", d.stopped_by.c_str());
    std::printf("sandbox.idle_create_s=%.1f\n", d.create_s);
    std::printf("sandbox.idle_host_kib_per_sandbox=%.0f\n", d.host_kib_per_sandbox);
    std::printf("sandbox.idle_cgroup_kib_per_sandbox=%.0f\n", d.cgroup_kib_per_sandbox);
    std::printf("sandbox.idle_destroy_s=%.1f\n", d.destroy_s);
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

void RegisterSandboxBench(CLI::App& bench, int* exit_code) {
  auto options = std::make_shared<SandboxBenchOptions>();
  CLI::App* sub = bench.add_subcommand("sandbox", "Sandbox create->exec->destroy latency vs runc, and idle density");
  sub->add_option("--n", options->n, "create->exec->destroy cycles per mode")->check(CLI::PositiveNumber);
  sub->add_option("--concurrency", options->concurrency, "concurrency levels after the sequential run");
  sub->add_option("--cli-n", options->cli_n, "whole-process `flotilla sandbox run` runs (0: skip)");
  sub->add_option("--idle", options->idle_target, "idle sandboxes to hold at once (0: skip)");
  sub->add_flag("!--no-runc", options->runc, "skip the runc comparison");
  sub->add_option("--state-dir", options->state_dir, "where the run's own fresh state directory goes (default /var/tmp)");
  sub->callback([options, exit_code] {
    absl::Status s = RunSandboxBench(*options);
    if (!s.ok()) {
      std::fprintf(stderr, "flotilla bench sandbox: %s\n", s.ToString().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace flotilla::bench
