// Resource exhaustion: fork bomb, memory bomb, filling the writable layer, exhausting file
// descriptors. Each must hit the sandbox's own limit (64 pids, 64 MiB, 32 MiB disk) and leave
// the host and the bystander sandbox working (checked in TearDown).
#include <atomic>
#include <csignal>
#include <sstream>
#include <thread>

#include "attack_fixture.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

using sandbox::StopReason;

class ResourceAttackTest : public AttackTest {};

TEST_F(ResourceAttackTest, ForkBombIsBoundedByThePidsLimit) {
  // Latency-sensitive: the bomb forks at normal priority (a best-effort sandbox's SCHED_IDLE
  // bomb barely runs while the machine is busy, which would leave the pids limit untested).
  sandbox::SandboxOptions options = SmallOptions();
  options.execution_class = sandbox::ExecutionClass::kLatencySensitive;
  std::string id = NewSandbox(options);
  ASSERT_FALSE(id.empty());
  InsideView view;
  ASSERT_TRUE(VerifyIsolated(id, &view));
  std::atomic<bool> done{false};
  size_t most = 0;
  std::thread sampler([&] {
    while (!done.load()) {
      most = std::max(most, ProcessesInPidNamespace(view.pid_ns).size());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  RunOutput r = Attack(id, "bomb() { bomb | bomb & }; bomb; exec sleep 30", 4000);
  done = true;
  sampler.join();
  ASSERT_TRUE(r.exec_ok) << r.error;
  // Stopped at the pids limit, or at the memory limit when the shells' memory runs out first
  // (a busy machine changes which comes first), or still bounded at the timeout.
  EXPECT_TRUE(r.result.reason == StopReason::kPids || r.result.reason == StopReason::kOom ||
              r.result.reason == StopReason::kTimeout)
      << sandbox::StopReasonName(r.result.reason) << ": " << r.result.detail;
  EXPECT_LT(r.host_wall_ms, 4000 + 1000 + 2000) << "Exec overran its timeout";
  // The bomb ran: the cgroup counted forks refused at its pids limit, or the sampler (every
  // 20 ms) caught its processes (a fast host forks to the limit and collapses between samples).
  EXPECT_TRUE(r.result.reason == StopReason::kPids || most > 8u)
      << "the bomb never ran: " << sandbox::StopReasonName(r.result.reason) << ", at most " << most << " processes";
  EXPECT_LE(most, kPidsLimit) << "more processes than the pids limit in the sandbox";
  // Afterwards the sandbox either works again or reports itself full; it never hangs.
  RunOutput after = Exec(id, {"/bin/true"}, 3000);
  ASSERT_TRUE(after.exec_ok) << after.error;
  EXPECT_TRUE(after.result.exit_code == 0 || after.result.reason == StopReason::kPids)
      << after.result.exit_code << " " << sandbox::StopReasonName(after.result.reason);
  EXPECT_LT(after.host_wall_ms, 3000 + 1000 + 2000);

  // The exact bound, counted from inside a fresh sandbox: forks succeed until the cgroup's
  // pids limit (init, sh and perl already count).
  std::string counter = NewSandbox();
  ASSERT_FALSE(counter.empty());
  RunOutput c = Attack(counter,
                       "exec /usr/bin/perl -e 'my $n = 0; while (1) { my $p = fork; last unless defined $p; "
                       "if (!$p) { sleep 30; exit 0 } $n++ } print \"forked=$n\\n\"'",
                       10000);
  ASSERT_TRUE(c.exec_ok) << c.error;
  ASSERT_EQ(LinesStartingWith(c.out, "forked=").size(), 1u) << c.out << c.err;
  int forked = std::stoi(c.out.substr(7));
  EXPECT_GE(forked, static_cast<int>(kPidsLimit) - 8);
  EXPECT_LT(forked, static_cast<int>(kPidsLimit));
}

TEST_F(ResourceAttackTest, MemoryBombIsKilledByTheMemoryLimit) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id,
                       "exec /usr/bin/python3 -c 'a = []\nwhile True: a.append(bytearray(1 << 20))'", 20000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.result.reason, StopReason::kOom) << r.result.detail;
  EXPECT_EQ(r.result.signal, SIGKILL);
  EXPECT_EQ(r.result.exit_code, -1);
  // The sandbox survives its bomb.
  RunOutput after = Exec(id, {"/bin/true"});
  ASSERT_TRUE(after.exec_ok) << after.error;
  EXPECT_EQ(after.result.exit_code, 0);
  auto info = runtime().Info(id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->resources.memory_bytes, kMemoryLimit);
  EXPECT_LE(info->memory_used_bytes, kMemoryLimit);
}

TEST_F(ResourceAttackTest, DiskFillStopsAtTheWritableLayerLimit) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id,
                       "for f in /fill /tmp/fill /root/fill; do "
                       "dd if=/dev/zero of=$f bs=1M count=96 2>/dev/null; echo \"$f rc=$? size=$(stat -c %s $f)\"; "
                       "rm -f $f; done",
                       30000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> lines = LinesStartingWith(r.out, "/");
  ASSERT_EQ(lines.size(), 3u) << r.out << r.err;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string path, rc, size;
    in >> path >> rc >> size;
    uint64_t bytes = std::stoull(size.substr(5));
    if (path == "/tmp/fill") {
      // /tmp may be a tmpfs charged to the memory cgroup: ENOSPC or the OOM killer stops dd.
      EXPECT_NE(rc, "rc=0") << line;
      EXPECT_LE(bytes, std::max(kDiskLimit, kMemoryLimit)) << line;
    } else {
      EXPECT_EQ(rc, "rc=1") << line;
      EXPECT_LE(bytes, kDiskLimit) << line;
    }
    EXPECT_GT(bytes, 0u) << line;
  }
  // Freed space is usable again: the sandbox is not left broken.
  RunOutput after = Exec(id, {"/bin/sh", "-c", "echo ok > /after && cat /after"});
  ASSERT_TRUE(after.exec_ok) << after.error;
  EXPECT_EQ(after.out, "ok\n");
}

// An endless writer must not make the runtime buffer unbounded output in the host process.
TEST_F(ResourceAttackTest, OutputFloodIsCapped) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id, "exec /usr/bin/yes flotilla-output-flood", 20000);  // Exec caps output at 4 MiB
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.result.reason, StopReason::kOutputLimit) << r.result.detail;
  EXPECT_LE(r.out.size() + r.err.size(), 4u << 20);
  EXPECT_GT(r.out.size(), 1u << 20) << "the flood never ran";
  EXPECT_LT(r.host_wall_ms, 20000);
}

TEST_F(ResourceAttackTest, FdExhaustionStaysWithinTheSandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string h = kHelperPath;
  RunOutput r = Attack(id, h + " fds & " + h + " fds & " + h + " fds & " + h + " fds & wait", 20000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> lines = LinesStartingWith(r.out, "fds ");
  EXPECT_GE(lines.size(), 1u) << r.out << r.err;
  EXPECT_EQ(LinesStartingWith(r.out, "setrlimit_nofile ok"), std::vector<std::string>{})
      << "the sandbox raised its own descriptor limit";
  for (const std::string& line : lines) {
    // EMFILE (its own limit) or ENOMEM (its memory cgroup): never ENFILE, the host's table.
    EXPECT_TRUE(line.ends_with("errno=EMFILE") || line.ends_with("errno=ENOMEM")) << line;
    std::istringstream in(line);
    std::string word, opened, limit;
    in >> word >> opened >> limit;
    EXPECT_LE(std::stoull(opened.substr(7)), std::stoull(limit.substr(6))) << line;
  }
  // The host's file table still has room.
  std::istringstream file_nr(ReadHostFile("/proc/sys/fs/file-nr"));
  uint64_t allocated = 0, unused = 0, max = 0;
  file_nr >> allocated >> unused >> max;
  EXPECT_LT(allocated, max / 2);
}

}  // namespace
}  // namespace flotilla::attack
