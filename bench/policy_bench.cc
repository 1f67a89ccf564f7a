#include "policy_bench.h"

#include <fcntl.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "flotilla/common/clock.h"
#include "flotilla/policies/apparmor.h"
#include "flotilla/policies/landlock.h"
#include "flotilla/policies/network.h"
#include "flotilla/policies/policy.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::bench {
namespace {

using flotilla::UniqueFd;

void Report(std::ostream& out, const std::string& name, std::vector<double> us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))]; };
  out << name << ".p50_us=" << at(0.5) << "\n" << name << ".p99_us=" << at(0.99) << "\n";
}

// Times `fn` n times, in microseconds.
std::vector<double> Time(int n, const std::function<bool()>& fn) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    Stopwatch sw;
    if (!fn()) return {};
    us.push_back(static_cast<double>(sw.ElapsedNanos()) / 1000.0);
  }
  return us;
}

// Nanoseconds on CLOCK_MONOTONIC; async-signal-safe, for use in a forked child.
int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Forks a child that times `step` (returns 0 on success) and reports the microseconds over a
// pipe; the parent runs `parent` meanwhile. Returns the child's figure, or -1 on failure.
double TimeInChild(const std::function<int()>& step, const std::function<bool()>& parent) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  UniqueFd rd(fds[0]);
  UniqueFd wr(fds[1]);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int64_t start = NowNs();
    int err = step();
    double us = err == 0 ? static_cast<double>(NowNs() - start) / 1000.0 : -1;
    (void)!write(wr.get(), &us, sizeof(us));
    _exit(err == 0 ? 0 : 1);
  }
  wr.Reset();
  bool ok = parent();
  double us = -1;
  if (read(rd.get(), &us, sizeof(us)) != sizeof(us)) us = -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? us : -1;
}

std::vector<double> Repeat(int n, const std::function<double()>& once) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    double v = once();
    if (v < 0) return {};
    us.push_back(v);
  }
  return us;
}

void BenchSeccomp(int n, const policies::Policy& policy, std::ostream& out) {
  Report(out, "policies.seccomp_compile", Time(std::max(1, n / 10), [&] {
           return policies::CompileSeccomp(policy.syscalls).ok();
         }));
  Report(out, "policies.seccomp_cached_get", Time(n, [&] { return policies::SeccompCompiler::Get(policy).ok(); }));
  auto program = policies::SeccompCompiler::Get(policy);
  auto supervisor = policies::SeccompSupervisor::Start();
  if (!program.ok() || !supervisor.ok()) {
    out << "policies.seccomp=skipped (" << (program.ok() ? supervisor.status() : program.status()) << ")\n";
    return;
  }
  std::vector<double> parent_us;
  Report(out, "policies.seccomp_install_in_child", Repeat(n, [&] {
           int sv[2];
           if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -1.0;
           UniqueFd parent_end(sv[0]);
           UniqueFd child_end(sv[1]);
           return TimeInChild([&] { return policies::InstallSeccompInChild(**program, child_end.get()); },
                              [&] {
                                child_end.Reset();
                                Stopwatch sw;
                                auto fd = policies::ReceiveListenerFd(parent_end.get());
                                if (!fd.ok()) return false;
                                auto watch = (*supervisor)->Watch("bench", std::move(*fd));
                                parent_us.push_back(static_cast<double>(sw.ElapsedNanos()) / 1000.0);
                                return watch.ok();  // the watch ends here: unregistered
                              });
         }));
  // Includes waiting for the child to send the fd: an upper bound on the parent's share.
  Report(out, "policies.seccomp_receive_watch_unwatch", parent_us);
}

void BenchNetwork(int n, const policies::Policy& policy, std::ostream& out) {
  auto root = policies::FindCgroup2Mount();
  auto enforcer = root.ok() ? policies::NetworkEnforcer::Create() : root.status();
  if (!enforcer.ok()) {
    out << "policies.ebpf=skipped (" << enforcer.status() << ")\n";
    return;
  }
  std::string dir = *root + "/flotilla-bench-" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0755) != 0) {
    out << "policies.ebpf=skipped (cannot create " << dir << ")\n";
    return;
  }
  {
    UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    Report(out, "policies.ebpf_attach_detach", Time(n, [&] {
             return (*enforcer)->Attach(policy.network, fd.get()).ok();  // destroyed at once: detach
           }));
  }
  rmdir(dir.c_str());
}

void BenchLandlock(int n, const policies::Policy& policy, std::ostream& out) {
  auto plan = policies::LandlockPlan::Create(policy.filesystem);
  if (!plan.ok()) {
    out << "policies.landlock=skipped (" << plan.status() << ")\n";
    return;
  }
  Report(out, "policies.landlock_apply_in_child", Repeat(n, [&] {
           return TimeInChild([&] { return plan->ApplyInChild(); }, [] { return true; });
         }));
  policies::FilesystemPolicy nested = policy.filesystem;
  nested.read_only.push_back("/usr");
  nested.hidden.push_back("/etc/shadow");
  auto nested_plan = policies::LandlockPlan::Create(nested);
  if (nested_plan.ok()) {
    Report(out, "policies.landlock_apply_nested_in_child", Repeat(n, [&] {
             return TimeInChild([&] { return nested_plan->ApplyInChild(); }, [] { return true; });
           }));
  }
}

}  // namespace

int RunPolicyBench(int n, std::ostream& out) {
  auto policy = policies::LoadPolicy("default");
  if (!policy.ok()) {
    out << "policies.error=" << policy.status() << "\n";
    return 1;
  }
  out << "policies.n=" << n << "\n";
  BenchSeccomp(n, *policy, out);
  BenchNetwork(n, *policy, out);
  BenchLandlock(n, *policy, out);
  Report(out, "policies.apparmor_render", Time(n, [&] {
           return policies::RenderAppArmorProfile(*policy, "flotilla-bench").ok();
         }));
  return 0;
}

}  // namespace flotilla::bench
