// The runtime for real: namespaces, identity mapping, root filesystem, /proc masks, exec.
#include <signal.h>
#include <cstdlib>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "flotilla/policies/apparmor.h"
#include "sandbox_fixture.h"

namespace flotilla::sandbox::testing {
namespace {

std::string Trim(std::string s) { return std::string(absl::StripAsciiWhitespace(s)); }

TEST_F(SandboxTest, EchoStreamsStdoutAndStderrAndExitCode) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  std::string out, err;
  ExecResult r = Run(sb.id(), {"/bin/sh", "-c", "echo hello; echo oops >&2; exit 7"}, &out, &err);
  EXPECT_EQ(out, "hello\n");
  EXPECT_EQ(err, "oops\n");
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.reason, StopReason::kNone);
}

TEST_F(SandboxTest, NamespacesAreNew) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  // The first exec is pid 2; init (pid 1) shows no trace of the host runtime's command line.
  EXPECT_EQ(Trim(Sh(sb.id(), "echo $$; tr -d '\\0' < /proc/1/cmdline; echo; cat /proc/1/comm")),
            "2\nflotilla-init\nflotilla-init");
  for (const char* ns : {"user", "pid", "mnt", "net", "uts", "ipc", "cgroup"}) {
    struct stat host;
    ASSERT_EQ(::stat((std::string("/proc/self/ns/") + ns).c_str(), &host), 0);
    std::string out = Sh(sb.id(), std::string("stat -L -c %i /proc/self/ns/") + ns);
    EXPECT_NE(Trim(out), std::to_string(host.st_ino)) << ns;
    EXPECT_FALSE(Trim(out).empty()) << ns;
  }
  EXPECT_EQ(Trim(Sh(sb.id(), "hostname")), sb.id());
  EXPECT_EQ(Trim(Sh(sb.id(), "cat /proc/self/cgroup | tail -1")), "0::/");
}

// Network namespaces come from the zygote's pool (made ahead) or the clone: either way each
// sandbox has its own, with only loopback, up, and none is handed out twice.
TEST_F(SandboxTest, EverySandboxHasItsOwnNetworkNamespaceWithLoopbackUp) {
  std::vector<std::unique_ptr<ScopedSandbox>> boxes;
  std::set<std::string> seen;
  for (int i = 0; i < 4; ++i) {
    boxes.push_back(std::make_unique<ScopedSandbox>(rt()));
    ASSERT_TRUE(boxes.back()->ok());
    const std::string& id = boxes.back()->id();
    std::string ns = Trim(Sh(id, "stat -L -c %i /proc/self/ns/net"));
    EXPECT_TRUE(seen.insert(ns).second) << "network namespace " << ns << " shared by two sandboxes";
    EXPECT_EQ(Trim(Sh(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")), "lo");
    // Loopback up: a connection to a closed port there is refused (111), not unreachable.
    EXPECT_EQ(Trim(Sh(id, "python3 -c \"import socket; print(socket.socket().connect_ex(('127.0.0.1', 1)))\"")),
              "111");
  }
}

// Where the kernel has AppArmor, init moves under the policy's generated profile after
// pivot_root and every process of the sandbox runs confined; elsewhere the enforcer is
// reported inactive with the reason.
TEST_F(SandboxTest, AppArmorConfinesTheSandboxWhereTheKernelHasIt) {
  auto created = rt().Create(SandboxOptions{});
  ASSERT_TRUE(created.ok()) << created.status();
  const auto& active = created->enforcers_active;
  const bool confined = std::find(active.begin(), active.end(), "apparmor") != active.end();
  if (policies::AppArmorEnabled()) {
    EXPECT_TRUE(confined) << absl::StrJoin(created->enforcers_inactive, "; ");
    std::string label = Trim(Sh(created->id, "cat /proc/self/attr/current"));
    EXPECT_TRUE(absl::StartsWith(label, "flotilla-")) << label;
    EXPECT_TRUE(absl::StrContains(label, "(enforce)")) << label;
  } else {
    EXPECT_FALSE(confined);
    std::string inactive = absl::StrJoin(created->enforcers_inactive, "; ");
    EXPECT_TRUE(absl::StrContains(inactive, "apparmor: not enabled")) << inactive;
  }
  EXPECT_TRUE(rt().Destroy(created->id).ok());
}

// An OOM kill inside the sandbox hits the commands before init (which would end the sandbox).
TEST_F(SandboxTest, InitIsTheLastOomVictim) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  // init raises its own value only around each clone of a command (the child inherits it) and
  // lowers it again once the command has exec'd: poll, as the shell may run before init does.
  EXPECT_EQ(Trim(Sh(sb.id(),
                    "for i in $(seq 100); do v=$(cat /proc/1/oom_score_adj); [ \"$v\" = 0 ] && break; sleep 0.02; done; "
                    "echo $v; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'")),
            "0\n500\n500");
}

TEST_F(SandboxTest, RootInsideMapsToUnprivilegedHostUid) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(Trim(Sh(sb.id(), "id -u; id -g")), "0\n0");
  EXPECT_EQ(Trim(Sh(sb.id(), "cat /proc/self/uid_map")), "0     100000      65536");
  // A long-running process inside, seen from the host: uid 100000.
  ExecOptions o;
  o.timeout_ms = 5000;
  std::string out = Sh(sb.id(), "grep -E '^(Uid|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status");
  EXPECT_NE(out.find("Uid:\t0\t0\t0\t0"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
  // CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT
  // AUDIT_WRITE SETFCAP: no NET_RAW, MKNOD, SYS_ADMIN, SYS_PTRACE, SYS_MODULE...
  EXPECT_NE(out.find("CapBnd:\t00000000a00405fb"), std::string::npos) << out;
}

TEST_F(SandboxTest, PivotRootHidesTheHost) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  ExecResult r;
  // The host's checkout (where this test's sources live) must not be visible inside.
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string host_dir = src != nullptr ? src : "/home";
  std::string out = Sh(sb.id(), "ls /; test -e '" + host_dir + "/CMakeLists.txt' || echo no-host-dir; "
                                "test -e /etc/shadow || echo no-shadow; "
                                "test -e /sys/kernel || echo no-sys; cat /etc/passwd | head -1", &r);
  EXPECT_NE(out.find("no-host-dir"), std::string::npos) << out;
  EXPECT_NE(out.find("no-shadow"), std::string::npos) << out;
  EXPECT_NE(out.find("no-sys"), std::string::npos) << out;
  EXPECT_NE(out.find("root:x:0:0:root:/root:/bin/bash"), std::string::npos) << out;
  EXPECT_EQ(Trim(Sh(sb.id(), "awk '$5 == \"/\"' /proc/self/mountinfo | wc -l")), "1");
  EXPECT_EQ(Trim(Sh(sb.id(), "awk '$5 == \"/\" {print $9}' /proc/self/mountinfo")), "overlay");
}

TEST_F(SandboxTest, ProcIsMasked) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(Trim(Sh(sb.id(), "wc -c < /proc/keys; wc -c < /proc/timer_list; ls /proc/acpi | wc -l")), "0\n0\n0");
  ExecResult r;
  std::string out = Sh(sb.id(), "echo 1 > /proc/sys/kernel/domainname 2>&1 && echo wrote; "
                                "echo b > /proc/sysrq-trigger; echo rc=$?", &r);
  EXPECT_EQ(out.find("wrote"), std::string::npos) << out;
  EXPECT_EQ(Trim(Sh(sb.id(), "grep ' /proc/sys ' /proc/self/mountinfo | grep -c ' ro,'")), "1");
  EXPECT_EQ(Trim(Sh(sb.id(), "ls /dev | tr '\\n' ' '")), "fd full mqueue null ptmx pts random shm stderr stdin stdout tty urandom zero");
}

TEST_F(SandboxTest, OverlayWritesStayInTheSandbox) {
  ScopedSandbox a(rt()), b(rt());
  ASSERT_TRUE(a.ok() && b.ok());
  ExecResult r;
  Sh(a.id(), "rm -rf /usr/bin/tac && echo hi > /usr/new-file && rm -f /etc/passwd", &r);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Trim(Sh(a.id(), "test -e /usr/bin/tac && echo present || echo gone")), "gone");
  EXPECT_TRUE(std::ifstream("/usr/bin/tac").good());
  EXPECT_FALSE(std::ifstream("/usr/new-file").good());
  EXPECT_EQ(Trim(Sh(b.id(), "test -e /usr/bin/tac && echo present; cat /etc/passwd | wc -l")), "present\n4");
}

TEST_F(SandboxTest, WritableLayerSizeLimitGivesEnospc) {
  SandboxOptions o;
  o.resources.disk_bytes = 4ull << 20;
  ScopedSandbox sb(rt(), o);
  ASSERT_TRUE(sb.ok());
  std::string err;
  ExecResult r = Run(sb.id(), {"/bin/sh", "-c", "dd if=/dev/zero of=/big bs=1M count=8"}, nullptr, &err);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_EQ(r.reason, StopReason::kDiskFull);
}

TEST_F(SandboxTest, MemoryLimitReportsOom) {
  SandboxOptions o;
  o.resources.memory_bytes = 32ull << 20;
  ScopedSandbox sb(rt(), o);
  ASSERT_TRUE(sb.ok());
  ExecOptions e;
  e.timeout_ms = 20000;
  ExecResult r = Run(sb.id(), {"/usr/bin/python3", "-c", "a = bytearray(256 << 20); a[::4096] = b'x' * len(a[::4096])"},
                     nullptr, nullptr, e);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.reason, StopReason::kOom) << r.detail;
}

TEST_F(SandboxTest, PidsLimitReportsPids) {
  SandboxOptions o;
  o.resources.pids = 16;
  ScopedSandbox sb(rt(), o);
  ASSERT_TRUE(sb.ok());
  ExecOptions e;
  e.timeout_ms = 10000;
  ExecResult r = Run(sb.id(), {"/bin/sh", "-c", "for i in $(seq 40); do sleep 30 & done; wait"}, nullptr, nullptr, e);
  EXPECT_EQ(r.reason, StopReason::kPids) << r.detail;
}

TEST_F(SandboxTest, ExecTimeoutKillsTheProcessGroup) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  ExecOptions e;
  e.timeout_ms = 200;
  ExecResult r = Run(sb.id(), {"/bin/sh", "-c", "sleep 30 & sleep 30"}, nullptr, nullptr, e);
  EXPECT_EQ(r.reason, StopReason::kTimeout);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(r.wall_ms, 2000);
  // The killed background sleep is reaped by the sandbox's init a moment later (until then a
  // zombie still matches): poll for up to two seconds.
  EXPECT_EQ(Trim(Sh(sb.id(), "for i in $(seq 100); do n=$(pgrep -c sleep); [ \"$n\" = 0 ] && break; "
                             "sleep 0.02; done; echo $n")),
            "0");
}

TEST_F(SandboxTest, OutputCapStopsTheProcess) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  ExecOptions e;
  e.output_limit_bytes = 1000;
  e.timeout_ms = 10000;
  std::string out;
  ExecResult r = Run(sb.id(), {"/bin/sh", "-c", "yes"}, &out, nullptr, e);
  EXPECT_EQ(r.reason, StopReason::kOutputLimit);
  EXPECT_EQ(out.size(), 1000u);
}

TEST_F(SandboxTest, StdinEnvAndCwd) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  ExecOptions e;
  e.stdin_data = "abc";
  e.env = {{"FOO", "bar"}};
  e.cwd = "/tmp";
  std::string out;
  Run(sb.id(), {"sh", "-c", "cat; echo \" $FOO $(pwd)\""}, &out, nullptr, e);
  EXPECT_EQ(out, "abc bar /tmp\n");
  ExecResult r = Run(sb.id(), {"/no/such/binary"});
  EXPECT_EQ(r.exit_code, 127);
}

TEST_F(SandboxTest, ZombiesAreReaped) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  // The shell exits at once; its background children become init's and exit later.
  Sh(sb.id(), "for i in 1 2 3 4 5; do (sleep 0.05) & done; exit 0");
  ExecResult r;
  // Wait (bounded, for loaded machines) until no sleep is left, a zombie one included: then
  // all five have exited and been reaped; nothing may remain a zombie.
  std::string out = Sh(sb.id(),
                       "for i in $(seq 150); do n=$(pgrep -c -x sleep); [ \"$n\" = 0 ] && break; sleep 0.02; done; "
                       "ps -eo stat= | grep -c Z || true",
                       &r);
  EXPECT_EQ(Trim(out), "0");
}

TEST_F(SandboxTest, BestEffortRunsSchedIdle) {
  SandboxOptions o;
  o.execution_class = ExecutionClass::kBestEffort;
  ScopedSandbox be(rt(), o);
  o.execution_class = ExecutionClass::kLatencySensitive;
  ScopedSandbox ls(rt(), o);
  ASSERT_TRUE(be.ok() && ls.ok());
  EXPECT_EQ(Trim(Sh(be.id(), "chrt -p $$ | head -1 | sed 's/.*: //'")), "SCHED_IDLE");
  EXPECT_EQ(Trim(Sh(ls.id(), "chrt -p $$ | head -1 | sed 's/.*: //'")), "SCHED_OTHER");
}

// Inits are clones of the zygote started at Open, not of the runtime process as it is at
// Create: memory this process touched after Open is not in a new init, and the init is still
// this process's child (the runtime reaps it).
TEST_F(SandboxTest, InitIsTheRuntimesChildButNotACopyOfIt) {
  std::vector<char> grown(64u << 20);
  for (size_t i = 0; i < grown.size(); i += 4096) grown[i] = 1;
  ScopedSandbox sb(rt(), SandboxOptions{});
  ASSERT_TRUE(sb.ok());
  int inits = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "status");
    std::string line, name;
    long ppid = -1, rss_anon_kb = -1;
    while (std::getline(f, line)) {
      if (absl::StartsWith(line, "Name:")) name = Trim(line.substr(5));
      if (absl::StartsWith(line, "PPid:")) ppid = std::atol(line.c_str() + 5);
      if (absl::StartsWith(line, "RssAnon:")) rss_anon_kb = std::atol(line.c_str() + 8);
    }
    if (name != "flotilla-init" || ppid != ::getpid()) continue;
    ++inits;
    EXPECT_GE(rss_anon_kb, 0);
    EXPECT_LT(rss_anon_kb, 16 * 1024) << e.path();
  }
  EXPECT_EQ(inits, 1);
  EXPECT_EQ(grown[4096], 1);
}

TEST(RuntimeOpenTest, FailsWhenTheZygoteBinaryIsNotAZygote) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  flotilla::testing::TempDir dir;
  RuntimeOptions o;
  o.state_dir = dir.path().string();
  o.cgroup_prefix = "flotilla-test-" + std::to_string(::getpid()) + "-z";
  o.zygote_binary = "/bin/true";
  auto rt = Runtime::Open(o);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kUnavailable) << rt.status();
  EXPECT_TRUE(absl::StrContains(rt.status().message(), "zygote did not start")) << rt.status();
}

// The pids of this process's children named `name`.
std::vector<pid_t> ChildrenNamed(const std::string& name) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "status");
    std::string line, n;
    long ppid = -1;
    while (std::getline(f, line)) {
      if (absl::StartsWith(line, "Name:")) n = Trim(line.substr(5));
      if (absl::StartsWith(line, "PPid:")) ppid = std::atol(line.c_str() + 5);
    }
    if (n == name && ppid == ::getpid()) out.push_back(static_cast<pid_t>(std::atol(e.path().filename().c_str())));
  }
  return out;
}

// A zygote killed from outside costs the next Create (Unavailable); the one after that gets a
// new zygote.
TEST(RuntimeOpenTest, ANewZygoteReplacesAKilledOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  flotilla::testing::TempDir dir;
  RuntimeOptions o;
  o.state_dir = dir.path().string();
  o.cgroup_prefix = "flotilla-test-" + std::to_string(::getpid()) + "-k";
  auto rt = Runtime::Open(o);
  ASSERT_TRUE(rt.ok()) << rt.status();
  std::vector<pid_t> zygotes = ChildrenNamed("flotilla-zygote");
  ASSERT_EQ(zygotes.size(), 1u);
  ASSERT_EQ(::kill(zygotes[0], SIGKILL), 0);
  auto failed = (*rt)->Create(SandboxOptions{});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
  auto created = (*rt)->Create(SandboxOptions{});
  ASSERT_TRUE(created.ok()) << created.status();
  ExecOptions eo;
  eo.argv = {"/bin/true"};
  auto r = (*rt)->Exec(created->id, eo, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE((*rt)->Destroy(created->id).ok());
  std::vector<pid_t> now = ChildrenNamed("flotilla-zygote");
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], zygotes[0]);
}

// Open sets "favordynmods" on the cgroup v2 superblock (RuntimeOptions::favor_cgroup_migrations)
// and says so; the kernel's own mount table agrees.
TEST_F(SandboxTest, CgroupMigrationsAreFavoredWhereTheKernelCanDoIt) {
  if (!rt().features().cgroup_v2_unified) GTEST_SKIP() << "no cgroup v2 hierarchy on this host";
  std::ifstream in("/proc/self/mountinfo");
  bool mounted_with_option = false;
  for (std::string line; std::getline(in, line);) {
    if (absl::StrContains(line, " - cgroup2 ") && absl::StrContains(line, "favordynmods")) mounted_with_option = true;
  }
  EXPECT_EQ(rt().features().cgroup_favordynmods, mounted_with_option);
  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  if (std::atoi(u.release) >= 6) {
    EXPECT_TRUE(rt().features().cgroup_favordynmods) << "Linux 6.0+ has the option";
  }
  if (!rt().features().cgroup_favordynmods) {
    EXPECT_TRUE(absl::StrContains(rt().features().detail, "favordynmods")) << rt().features().detail;
  }
}

}  // namespace
}  // namespace flotilla::sandbox::testing
