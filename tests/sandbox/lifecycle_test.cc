// Sandbox lifecycle for real: files, snapshots, pause/resume, events, crash reasons, destroy.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "sandbox_fixture.h"

namespace flotilla::sandbox::testing {
namespace {

std::string Trim(std::string s) { return std::string(absl::StripAsciiWhitespace(s)); }

std::string ReadHost(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Host pids whose cgroup path names `needle`.
std::vector<int> ProcessesInCgroup(const std::string& needle) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.empty() || !absl::ascii_isdigit(name[0])) continue;
    if (absl::StrContains(ReadHost(e.path().string() + "/cgroup"), needle)) out.push_back(std::stoi(name));
  }
  return out;
}

std::vector<std::string> CgroupDirsNamed(const std::string& id) {
  std::vector<std::string> out;
  for (const char* h : {"memory", "pids", "freezer", "cpu", "unified"}) {
    std::error_code ec;
    std::string root = std::string("/sys/fs/cgroup/") + h;
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != std::filesystem::end(it);
         it.increment(ec)) {
      // "<runtime instance>.<sandbox id>"
      if (absl::EndsWith(it->path().filename().string(), "." + id)) out.push_back(it->path().string());
      if (it.depth() > 3) it.disable_recursion_pending();
    }
  }
  return out;
}

TEST_F(SandboxTest, PutAndGetFileStayInsideTheRoot) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  ASSERT_TRUE(rt().PutFile(sb.id(), "/work/dir/a.txt", "hello", 0640).ok());
  EXPECT_EQ(Trim(Sh(sb.id(), "cat /work/dir/a.txt; stat -c ' %a %u' /work/dir/a.txt")), "hello 640 0");
  auto got = rt().GetFile(sb.id(), "/work/dir/a.txt", 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->content, "hello");
  EXPECT_EQ(got->mode, 0640u);
  // Links inside the sandbox that point "out" resolve inside its root.
  Sh(sb.id(), "ln -s /../../../../etc /tmp/up; ln -s /proc/1/root /tmp/magic; ln -s / /tmp/root");
  const std::string host_hosts = ReadHost("/etc/hosts");
  auto passwd = rt().GetFile(sb.id(), "/tmp/up/passwd", 0);
  ASSERT_TRUE(passwd.ok()) << passwd.status();
  EXPECT_TRUE(absl::StartsWith(passwd->content, "root:x:0:0:root:/root:/bin/bash\n")) << passwd->content;
  EXPECT_EQ(passwd->content, rt().GetFile(sb.id(), "/etc/passwd", 0)->content);
  EXPECT_EQ(rt().GetFile(sb.id(), "/../../../etc/shadow", 0).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(rt().PutFile(sb.id(), "/tmp/root/../../etc/hosts", "inside\n", 0644).ok());
  EXPECT_EQ(ReadHost("/etc/hosts"), host_hosts);
  EXPECT_EQ(Trim(Sh(sb.id(), "cat /etc/hosts")), "inside");
  // Magic links and kernel files are refused.
  EXPECT_FALSE(rt().GetFile(sb.id(), "/tmp/magic/etc/passwd", 0).ok());
  EXPECT_EQ(rt().GetFile(sb.id(), "/proc/1/status", 0).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(rt().PutFile(sb.id(), "/proc/sys/kernel/hostname", "x", 0644).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(rt().GetFile(sb.id(), "relative", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt().GetFile(sb.id(), "/etc/passwd", 3).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(rt().GetFile("sbx-nope", "/etc/passwd", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SandboxTest, SnapshotStartsNewSandboxesFromTheLayer) {
  ScopedSandbox a(rt());
  ASSERT_TRUE(a.ok());
  ExecResult r;
  Sh(a.id(), "echo snap > /root/marker && rm /usr/bin/tac && mkdir -p /opt/x && echo y > /opt/x/y", &r);
  ASSERT_EQ(r.exit_code, 0);
  auto snap = rt().Snapshot(a.id(), "test-snap");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(absl::StartsWith(snap->layer_id, "sha256:")) << snap->layer_id;
  EXPECT_EQ(snap->layer_id.size(), 71u);
  // Committing the same content again gives the same id.
  EXPECT_EQ(rt().Snapshot(a.id(), "")->layer_id, snap->layer_id);
  for (const std::string& image : {snap->layer_id, std::string("test-snap")}) {
    SandboxOptions o;
    o.image = image;
    ScopedSandbox b(rt(), o);
    ASSERT_TRUE(b.ok()) << image;
    EXPECT_EQ(Trim(Sh(b.id(), "cat /root/marker /opt/x/y; test -e /usr/bin/tac || echo no-tac; id -u")),
              "snap\ny\nno-tac\n0");
    // A snapshot of a snapshot stacks.
    Sh(b.id(), "echo two > /root/second");
    auto snap2 = rt().Snapshot(b.id(), "");
    ASSERT_TRUE(snap2.ok());
    SandboxOptions o2;
    o2.image = snap2->layer_id;
    ScopedSandbox c(rt(), o2);
    EXPECT_EQ(Trim(Sh(c.id(), "cat /root/marker /root/second")), "snap\ntwo");
  }
  SandboxOptions bad;
  bad.image = "no-such-image";
  EXPECT_EQ(rt().Create(bad).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SandboxTest, PauseFreezesAndResumeThaws) {
  SandboxOptions o;
  o.execution_class = ExecutionClass::kLatencySensitive;
  ScopedSandbox sb(rt(), o);
  ASSERT_TRUE(sb.ok());
  Sh(sb.id(), "echo x > /tmp/ticks; (while :; do echo x >> /tmp/ticks; sleep 0.01; done) > /dev/null 2>&1 &");
  ASSERT_TRUE(rt().GetFile(sb.id(), "/tmp/ticks", 0).ok());
  ASSERT_TRUE(rt().Pause(sb.id()).ok());
  EXPECT_TRUE(rt().Info(sb.id())->paused);
  ExecOptions e;
  e.argv = {"/bin/true"};
  EXPECT_EQ(rt().Exec(sb.id(), e, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  size_t before = rt().GetFile(sb.id(), "/tmp/ticks", 0)->content.size();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(rt().GetFile(sb.id(), "/tmp/ticks", 0)->content.size(), before);
  ASSERT_TRUE(rt().Resume(sb.id()).ok());
  EXPECT_FALSE(rt().Info(sb.id())->paused);
  size_t after = before;
  for (int i = 0; i < 300 && after == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = rt().GetFile(sb.id(), "/tmp/ticks", 0)->content.size();
  }
  EXPECT_GT(after, before);
}

TEST_F(SandboxTest, DestroyLeavesNothing) {
  std::vector<SandboxEvent> events;
  std::mutex mu;
  auto watch = rt().WatchEvents("", [&](const SandboxEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  auto created = rt().Create({});
  ASSERT_TRUE(created.ok());
  const std::string id = created->id;
  Sh(id, "sleep 1000 > /dev/null 2>&1 & sleep 1000 > /dev/null 2>&1 & echo started");
  EXPECT_EQ(ProcessesInCgroup(id).size(), 3u);  // init + two sleeps
  EXPECT_EQ(CgroupDirsNamed(id).size(), 5u);  // memory, pids, freezer, cpu (the policy sets a quota), unified
  EXPECT_EQ(rt().List().size(), 1u);
  ASSERT_TRUE(rt().Destroy(id).ok());
  EXPECT_TRUE(ProcessesInCgroup(id).empty());
  EXPECT_TRUE(CgroupDirsNamed(id).empty());
  EXPECT_FALSE(absl::StrContains(ReadHost("/proc/self/mountinfo"), id));
  EXPECT_FALSE(absl::StrContains(ReadHost("/proc/self/mountinfo"), state_dir() + "/run/") &&
               absl::StrContains(ReadHost("/proc/self/mountinfo"), "/sbx/"));
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(state_dir() + "/run", ec);
       it != std::filesystem::end(it); it.increment(ec)) {
    EXPECT_FALSE(absl::StrContains(it->path().string(), id)) << it->path();
  }
  EXPECT_EQ(rt().Destroy(id).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(rt().List().empty());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, SandboxEvent::Kind::kCreated);
  EXPECT_EQ(events[1].kind, SandboxEvent::Kind::kDestroyed);
  EXPECT_EQ(events[1].sandbox_id, id);
}

TEST_F(SandboxTest, DestroyWhileExecRunningReturnsDestroyed) {
  auto created = rt().Create({});
  ASSERT_TRUE(created.ok());
  ExecResult result;
  std::thread t([&] { result = Run(created->id, {"/bin/sleep", "30"}); });
  // Wait until the sleep runs, then destroy.
  for (int i = 0; i < 200 && ProcessesInCgroup(created->id).size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(rt().Destroy(created->id).ok());
  t.join();
  EXPECT_EQ(result.reason, StopReason::kDestroyed);
  EXPECT_LT(result.wall_ms, 5000);
}

TEST_F(SandboxTest, SandboxTimeoutCrashesWithReason) {
  std::atomic<int> crashed{0};
  std::atomic<int> reason{0};
  SandboxOptions o;
  o.resources.timeout_ms = 300;
  auto created = rt().Create(o);
  ASSERT_TRUE(created.ok());
  auto watch = rt().WatchEvents(created->id, [&](const SandboxEvent& e) {
    if (e.kind == SandboxEvent::Kind::kCrashed) {
      reason = static_cast<int>(e.reason);
      ++crashed;
    }
  });
  ExecResult r = Run(created->id, {"/bin/sleep", "30"});
  EXPECT_EQ(r.reason, StopReason::kTimeout);
  EXPECT_LT(r.wall_ms, 5000);
  for (int i = 0; i < 200 && crashed == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(crashed.load(), 1);
  EXPECT_EQ(reason.load(), static_cast<int>(StopReason::kTimeout));
  ExecOptions e;
  e.argv = {"/bin/true"};
  EXPECT_EQ(rt().Exec(created->id, e, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(rt().Destroy(created->id).ok());
}

TEST_F(SandboxTest, RemovingTheShellReportsBroken) {
  ScopedSandbox sb(rt());
  ASSERT_TRUE(sb.ok());
  std::vector<SandboxEvent> events;
  std::mutex mu;
  auto watch = rt().WatchEvents(sb.id(), [&](const SandboxEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  ExecResult r = Run(sb.id(), {"/bin/rm", "-rf", "/usr/bin"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.reason, StopReason::kSandboxBroken);
  EXPECT_TRUE(std::ifstream("/usr/bin/sh").good());
  r = Run(sb.id(), {"/bin/sh", "-c", "true"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.reason, StopReason::kSandboxBroken);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, SandboxEvent::Kind::kCrashed);
  EXPECT_EQ(events[0].reason, StopReason::kSandboxBroken);
}

TEST_F(SandboxTest, BadOptionsNameTheField) {
  SandboxOptions o;
  o.id = "../escape";
  auto r = rt().Create(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "id:")) << r.status();
  o.id = "";
  o.resources.cpu_weight = 20000;
  EXPECT_TRUE(absl::StrContains(rt().Create(o).status().message(), "resources.cpu_weight")) << rt().Create(o).status();
  ScopedSandbox sb(rt());
  ExecOptions e;
  EXPECT_EQ(rt().Exec(sb.id(), e, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  e.argv = {"/bin/true"};
  e.env = {{"A=B", "c"}};
  EXPECT_EQ(rt().Exec(sb.id(), e, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  SandboxOptions dup;
  dup.id = sb.id();
  EXPECT_EQ(rt().Create(dup).status().code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace flotilla::sandbox::testing
