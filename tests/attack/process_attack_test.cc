// Attacks on processes and cgroups: signalling processes outside, escaping the sandbox's
// cgroups, and leaving a daemon behind after Destroy.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "attack_fixture.h"
#include "flotilla/common/ids.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

// True when a /proc/<pid>/cgroup line names the sandbox's own cgroup: the runtime names each
// sandbox's cgroup "<runtime instance>.<sandbox id>", under "<cgroup prefix>/".
bool InSandboxCgroup(const std::string& line, const std::string& prefix, const std::string& id) {
  return line.find("/" + prefix + "/") != std::string::npos && line.ends_with("." + id);
}

// A sandbox's cgroup directories ("<runtime instance>.<id>") anywhere under /sys/fs/cgroup
// (every hierarchy), depth-limited.
std::vector<std::string> CgroupDirsNamed(const std::string& id) {
  std::vector<std::string> found;
  std::vector<std::pair<std::string, int>> stack = {{"/sys/fs/cgroup", 0}};
  while (!stack.empty()) {
    auto [dir, depth] = stack.back();
    stack.pop_back();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (e->d_type != DT_DIR || n == "." || n == "..") continue;
      if (n.ends_with("." + id)) found.push_back(dir + "/" + n);
      if (depth < 6) stack.push_back({dir + "/" + n, depth + 1});
    }
    ::closedir(d);
  }
  return found;
}

TEST_F(AttackTest, SignalsDoNotReachProcessesOutside) {
  HostSleeper sleeper;
  ASSERT_GT(sleeper.pid(), 0);
  ASSERT_TRUE(sleeper.Alive());
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string host_pids = std::to_string(sleeper.pid()) + " " + std::to_string(::getpid());
  RunOutput r = Attack(id, std::string(kHelperPath) + " kill 9 " + host_pids +
                               "; kill -9 -1; kill -9 1; kill -KILL " + host_pids + " 2>/dev/null; echo survived");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(LinesStartingWith(r.out, "kill_"),
            (std::vector<std::string>{"kill_" + std::to_string(sleeper.pid()) + " errno=ESRCH",
                                      "kill_" + std::to_string(::getpid()) + " errno=ESRCH"}));
  EXPECT_EQ(LinesStartingWith(r.out, "survived"), std::vector<std::string>{"survived"});
  EXPECT_TRUE(sleeper.Alive()) << "the host-side sleeper was killed from inside the sandbox";
  // The sandbox's own init ignores SIGKILL from inside: the sandbox still runs.
  RunOutput after = Exec(id, {"/bin/true"});
  ASSERT_TRUE(after.exec_ok) << after.error;
  EXPECT_EQ(after.result.exit_code, 0);
}

TEST_F(AttackTest, ProcessesCannotLeaveTheSandboxCgroups) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  InsideView view;
  ASSERT_TRUE(VerifyIsolated(id, &view));
  RunOutput r;
  std::thread attack([&] {
    r = Attack(id,
               std::string(kHelperPath) + " cgroup\n"
               "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/memory/cgroup.procs /sys/fs/cgroup/pids/tasks "
               "/proc/1/root/sys/fs/cgroup/cgroup.procs $(find / -xdev -name cgroup.procs 2>/dev/null); do "
               "echo $$ 2>/dev/null > $f && echo \"escaped $f\"; done\n"
               "mkdir -p /tmp/cg; mount -t cgroup2 none /tmp/cg 2>/dev/null; echo mount2=$?\n"
               "mount -t cgroup -o memory none /tmp/cg 2>/dev/null; echo mount1=$?\n"
               "sleep 3; echo slept");
  });
  // While the attacker's shell is still alive, every process of the sandbox must sit in the
  // sandbox's own cgroups (memory, pids and the unified hierarchy that carries the eBPF net).
  std::vector<std::string> checked;
  for (int i = 0; i < 100 && checked.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<pid_t> pids = ProcessesInPidNamespace(view.pid_ns);
    bool sleeping = false;
    for (pid_t pid : pids) sleeping |= ReadHostFile("/proc/" + std::to_string(pid) + "/comm") == "sleep\n";
    if (!sleeping) continue;
    for (pid_t pid : pids) {
      std::istringstream lines(ReadHostFile("/proc/" + std::to_string(pid) + "/cgroup"));
      for (std::string line; std::getline(lines, line);) {
        bool watched = line.find(":memory:") != std::string::npos || line.find(":pids:") != std::string::npos ||
                       (line.rfind("0::", 0) == 0 && runtime().features().cgroup_v2_unified);
        if (!watched) continue;
        checked.push_back(line);
        EXPECT_TRUE(InSandboxCgroup(line, cgroup_prefix(), id)) << "pid " << pid << " escaped its cgroup: " << line;
      }
    }
  }
  attack.join();
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_GE(checked.size(), 4u) << "never saw the attacker's processes from the host";
  EXPECT_EQ(LinesStartingWith(r.out, "escaped"), std::vector<std::string>{});
  EXPECT_EQ(LinesStartingWith(r.out, "mount"), (std::vector<std::string>{"mount2=32", "mount1=32"}));
  for (const std::string& line : LinesStartingWith(r.out, "cgroup_procs ")) {
    EXPECT_FALSE(line.ends_with(" ok")) << line;
  }
  // Inside its cgroup namespace the sandbox sees itself at the root, never above it.
  for (const std::string& line : LinesStartingWith(r.out, "cgroup ")) {
    EXPECT_EQ(line.find(".."), std::string::npos) << line;
  }
  EXPECT_EQ(LinesStartingWith(r.out, "slept"), std::vector<std::string>{"slept"});
}

// A descriptor the runtime leaks into the sandbox (a host directory, a cgroup file, the
// runtime's state) lets openat() walk out: the runc "leaky vessels" class of escape.
TEST_F(AttackTest, NoHostDescriptorLeaksIntoTheSandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  RunOutput r = Attack(id, std::string("exec ") + kHelperPath + " fdscan </dev/null");
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> self = LinesStartingWith(r.out, "fd self ");
  ASSERT_GE(self.size(), 3u) << r.out;
  for (const std::string& line : LinesStartingWith(r.out, "fd ")) {
    std::istringstream in(line);
    std::string fd, owner, number, target;
    in >> fd >> owner >> number >> target;
    if (number == "unreadable") continue;  // the init's table is closed to the sandbox
    // Pipes, sockets and anonymous inodes are fine; a path must be one of the sandbox's own.
    bool anonymous = target.find(":[") != std::string::npos || target.rfind("anon_inode:", 0) == 0;
    bool own = target == "/dev/null" || target.rfind("/proc/", 0) == 0 || target == kHelperPath;
    EXPECT_TRUE(anonymous || own) << "descriptor from outside: " << line;
    EXPECT_EQ(target.find(state_path()), std::string::npos) << line;
    EXPECT_EQ(target.find("/sys/fs/cgroup"), std::string::npos) << line;
  }
  EXPECT_EQ(LinesStartingWith(r.out, "cwd "), std::vector<std::string>{"cwd /"});
}

TEST_F(AttackTest, NoProcessOrResourceIsLeftAfterDestroy) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  InsideView view;
  ASSERT_TRUE(VerifyIsolated(id, &view));
  const std::string cgroup_name = "." + id;  // "<prefix>/<runtime instance>.<id>"
  RunOutput r = Attack(id, std::string("exec ") + kHelperPath + " daemon 600");
  ASSERT_TRUE(r.exec_ok) << r.error;
  ASSERT_EQ(LinesStartingWith(r.out, "daemon pid=").size(), 1u) << r.out << r.err;
  // Positive controls: the daemon (setsid, double fork, streams closed) is alive, and the
  // host sees the sandbox's cgroups and mounts.
  std::vector<pid_t> before = ProcessesInPidNamespace(view.pid_ns);
  ASSERT_GE(before.size(), 2u) << "init and the daemon";
  // Pinned, so that its name cannot pass to a namespace made after the Destroy.
  NamespacePins pinned(before.front(), {"pid"});
  ASSERT_TRUE(pinned.ok());
  ASSERT_EQ(pinned.Link("pid"), view.pid_ns);
  EXPECT_FALSE(ProcessesInCgroupsNamed(cgroup_name).empty());
  EXPECT_FALSE(CgroupDirsNamed(id).empty());

  ASSERT_TRUE(DestroySandbox(id).ok());
  EXPECT_EQ(ProcessesInPidNamespace(view.pid_ns), std::vector<pid_t>{}) << "a process of the sandbox survived";
  EXPECT_EQ(ProcessesInCgroupsNamed(cgroup_name), std::vector<pid_t>{});
  for (pid_t pid : before) {
    EXPECT_NE(::kill(pid, 0), 0) << "pid " << pid << " still exists";
  }
  EXPECT_EQ(CgroupDirsNamed(id), std::vector<std::string>{});
  EXPECT_EQ(MountsContaining(id), std::vector<std::string>{});
  EXPECT_TRUE(absl::IsNotFound(runtime().Info(id).status()));
  RunOutput after = Exec(id, {"/bin/true"});
  EXPECT_FALSE(after.exec_ok);
  EXPECT_NE(after.error.find("NOT_FOUND"), std::string::npos) << after.error;
}

// The warm pool: a sandbox that ended cleanly is reset and handed to the next Create with the
// same options. The suite's runtime keeps a pool of one.
class WarmPoolAttackTest : public AttackTest {
 protected:
  static void SetUpTestSuite() { OpenSuiteRuntime(1); }
};

TEST_F(WarmPoolAttackTest, ReusedSandboxSeesNothingOfThePreviousSample) {
  // Options of its own: no sandbox of another test is pooled for them.
  sandbox::SandboxOptions options = SmallOptions();
  options.resources.pids = kPidsLimit - 1;
  options.labels = {{"sample", "first"}};
  std::string first = NewSandbox(options);
  ASSERT_FALSE(first.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(first));
  InsideView before;
  ASSERT_TRUE(VerifyIsolated(first, &before));
  // The first sample leaves what it can: files in every writable place, a changed system file,
  // a daemon, an environment for later shells, a shared-memory file and a listening socket.
  const std::string secret = NewId("secret");
  RunOutput dirty = Attack(first, "for d in /root /tmp /var/tmp /dev/shm /app; do mkdir -p $d && echo " + secret +
                                      " > $d/left-behind || exit 1; done\n"
                                      "echo 'leaked:x:0:0::/root:/bin/sh' >> /etc/passwd || exit 1\n"
                                      "echo 'export LEAKED=" + secret + "' >> /etc/profile || exit 1\n"
                                      "echo LEAKED=" + secret + " >> /etc/environment || exit 1\n"
                                      "rm -f /usr/bin/true\n"  // a removed binary must come back
                                      "exec " + std::string(kHelperPath) + " daemon 600");
  ASSERT_TRUE(dirty.exec_ok) << dirty.error;
  ASSERT_EQ(LinesStartingWith(dirty.out, "daemon pid=").size(), 1u) << dirty.out << dirty.err;
  const std::vector<pid_t> first_processes = ProcessesInPidNamespace(before.pid_ns);
  ASSERT_GE(first_processes.size(), 2u) << "init and the daemon";
  // The first sample's namespaces stay alive (without a process) until the end of the test:
  // a namespace made later cannot take the number that names one of them.
  NamespacePins pinned(first_processes.front(), {"pid", "mnt", "net"});
  ASSERT_TRUE(pinned.ok());
  ASSERT_EQ(pinned.Link("pid"), before.pid_ns);
  ASSERT_EQ(pinned.Link("mnt"), before.mnt_ns);
  ASSERT_EQ(pinned.Link("net"), before.net_ns);
  ASSERT_FALSE(CgroupDirsNamed(first).empty()) << "a sandbox of its own cgroups";

  ASSERT_TRUE(DestroySandbox(first).ok());
  EXPECT_TRUE(absl::IsNotFound(runtime().Info(first).status()));
  sandbox::CreateResult created;
  options.labels = {{"sample", "second"}};
  std::string second = NewSandbox(options, &created);
  ASSERT_FALSE(second.empty());
  ASSERT_TRUE(created.reused) << "the second Create was not handed the first sandbox, reset";
  EXPECT_NE(second, first);
  // The same shell: the first sandbox's cgroups hold the second's init, and no cgroup was made.
  EXPECT_EQ(CgroupDirsNamed(second), std::vector<std::string>{});
  EXPECT_EQ(ProcessesInCgroupsNamed("." + first).size(), 1u) << "only the new init";
  // Nothing of the first sample's processes or namespaces is left.
  EXPECT_EQ(ProcessesInPidNamespace(before.pid_ns), std::vector<pid_t>{}) << "a process of the first sample survived";
  for (pid_t pid : first_processes) EXPECT_NE(::kill(pid, 0), 0) << "pid " << pid << " still exists";
  InsideView after;
  ASSERT_TRUE(VerifyIsolated(second, &after));
  EXPECT_NE(after.pid_ns, before.pid_ns);
  EXPECT_NE(after.mnt_ns, before.mnt_ns);
  EXPECT_NE(after.net_ns, before.net_ns);
  // Seen from inside: no file, no process but init and this shell, no environment, its own name.
  RunOutput look = Exec(second, {"/bin/sh", "-lc",
                                 "for d in /root /tmp /var/tmp /dev/shm /app; do test -e $d/left-behind && echo file $d; done\n"
                                 "grep -c leaked /etc/passwd\n"
                                 "grep -l LEAKED /etc/profile /etc/environment\n"
                                 "echo env=${LEAKED:-none}\n"
                                 "test -x /usr/bin/true && echo true-present\n"
                                 "for p in /proc/[0-9]*; do echo proc $(cat $p/comm); done\n"
                                 "echo host=$(cat /proc/sys/kernel/hostname)"});
  ASSERT_TRUE(look.exec_ok) << look.error;
  EXPECT_EQ(LinesStartingWith(look.out, "file "), std::vector<std::string>{}) << look.out;
  EXPECT_EQ(LinesStartingWith(look.out, "0"), std::vector<std::string>{"0"}) << look.out;
  EXPECT_EQ(LinesStartingWith(look.out, "/etc/"), std::vector<std::string>{}) << look.out;
  EXPECT_EQ(LinesStartingWith(look.out, "env="), std::vector<std::string>{"env=none"}) << look.out;
  EXPECT_EQ(LinesStartingWith(look.out, "true-present"), std::vector<std::string>{"true-present"}) << look.out;
  EXPECT_EQ(LinesStartingWith(look.out, "host="), std::vector<std::string>{"host=" + second}) << look.out;
  // The glob is expanded before the loop runs: init and this shell.
  EXPECT_EQ(LinesStartingWith(look.out, "proc "), (std::vector<std::string>{"proc flotilla-init", "proc sh"}))
      << look.out;
}

// A sample that ended badly never hands its sandbox on: it is torn down (cgroups and all).
TEST_F(WarmPoolAttackTest, SandboxThatOomedOrWasDeniedIsNotReused) {
  struct Case {
    const char* name;
    std::string script;
    sandbox::StopReason reason;
  };
  const Case cases[] = {
      {"oom", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}", sandbox::StopReason::kOom},
      {"policy", std::string(kHelperPath) + " mount; exit 1", sandbox::StopReason::kPolicy},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    sandbox::SandboxOptions options = SmallOptions();
    options.resources.pids = kPidsLimit - 2;  // no sandbox of another test is pooled for these
    std::string id = NewSandbox(options);
    ASSERT_FALSE(id.empty());
    ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
    RunOutput r = Attack(id, c.script, 30000);
    ASSERT_TRUE(r.exec_ok) << r.error;
    ASSERT_EQ(r.result.reason, c.reason) << r.out << r.err << r.result.detail;
    ASSERT_FALSE(CgroupDirsNamed(id).empty()) << "a sandbox of its own cgroups";
    ASSERT_TRUE(DestroySandbox(id).ok());
    EXPECT_EQ(CgroupDirsNamed(id), std::vector<std::string>{}) << "kept for reuse";
    EXPECT_EQ(ProcessesInCgroupsNamed("." + id), std::vector<pid_t>{});
  }
}

}  // namespace
}  // namespace flotilla::attack
