// Sandboxes started ahead (RuntimeOptions::start_ahead): handed out only for the options they
// were made for, alive, with the caller's labels and a wall clock that starts at the handover;
// destroyed with the runtime.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "flotilla/common/ids.h"
#include "own_runtime.h"

namespace flotilla::sandbox {
namespace {

using testing::ReadHostFile;
using testing::SandboxProcesses;

class StartAheadTest : public testing::OwnRuntimeTest {
 protected:
  void SetUp() override { OpenRuntime("flotilla-ahead"); }

  // The ids of the processes' sandboxes that the runtime does not list: started ahead.
  std::set<std::string> UnlistedSandboxes() {
    std::set<std::string> listed, out;
    for (const SandboxInfo& i : rt_->List()) listed.insert(i.id);
    for (const auto& [pid, id] : SandboxProcesses(prefix_)) {
      if (!listed.count(id)) out.insert(id);
    }
    return out;
  }

  // Creates and destroys sandboxes with `o` until one is started ahead for them (bounded).
  bool WaitStartedAhead(const SandboxOptions& o) {
    for (int i = 0; i < 2; ++i) {
      auto c = rt_->Create(o);
      if (!c.ok()) return false;
      (void)rt_->Destroy(c->id);
    }
    for (int i = 0; i < 500; ++i) {
      if (!UnlistedSandboxes().empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

TEST_F(StartAheadTest, RepeatedOptionsAreHandedTheSandboxStartedAheadWithTheirLabels) {
  SandboxOptions o;
  o.resources.memory_bytes = 96ull << 20;
  ASSERT_TRUE(WaitStartedAhead(o));
  const std::string ahead = *UnlistedSandboxes().begin();
  std::vector<SandboxEvent> events;
  std::mutex mu;
  auto watch = rt_->WatchEvents("", [&](const SandboxEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  o.labels = {{"task", "t-17"}};
  auto c = rt_->Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->started_ahead);
  EXPECT_EQ(c->id, ahead);
  EXPECT_FALSE(c->enforcers_active.empty());
  auto info = rt_->Info(c->id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->labels.at("task"), "t-17");
  EXPECT_EQ(info->resources.memory_bytes, 96ull << 20);
  std::string out;
  ExecResult r = Run(c->id, "hostname; touch /fresh && ls /fresh", &out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(out, c->id + "\n/fresh\n");
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, SandboxEvent::Kind::kCreated);
    EXPECT_EQ(events[0].sandbox_id, c->id);
  }
  ASSERT_TRUE(rt_->Destroy(c->id).ok());
  for (const auto& [pid, id] : SandboxProcesses(prefix_)) EXPECT_NE(id, c->id);
}

TEST_F(StartAheadTest, OtherOptionsStartTheirOwnSandbox) {
  SandboxOptions o;
  o.resources.memory_bytes = 96ull << 20;
  ASSERT_TRUE(WaitStartedAhead(o));
  const std::string ahead = *UnlistedSandboxes().begin();
  SandboxOptions other = o;
  other.resources.memory_bytes = 128ull << 20;
  auto c = rt_->Create(other);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->started_ahead);
  EXPECT_NE(c->id, ahead);
  EXPECT_EQ(rt_->Info(c->id)->resources.memory_bytes, 128ull << 20);
  // A caller-chosen id never takes one either.
  SandboxOptions named = o;
  named.id = "named-" + NewId("t");
  auto n = rt_->Create(named);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_FALSE(n->started_ahead);
  EXPECT_EQ(n->id, named.id);
  EXPECT_TRUE(UnlistedSandboxes().count(ahead));
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
  EXPECT_TRUE(rt_->Destroy(n->id).ok());
}

TEST_F(StartAheadTest, TwoKindsAskedForInTurnAreBothStartedAhead) {
  SandboxOptions a, b, c;
  a.resources.memory_bytes = 96ull << 20;
  b.resources.memory_bytes = 112ull << 20;
  c.resources.memory_bytes = 128ull << 20;
  for (int i = 0; i < 2; ++i) {
    for (const SandboxOptions* o : {&a, &b}) {
      auto made = rt_->Create(*o);
      ASSERT_TRUE(made.ok()) << made.status();
      ASSERT_TRUE(rt_->Destroy(made->id).ok());
    }
  }
  for (int i = 0; i < 500 && UnlistedSandboxes().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(UnlistedSandboxes().size(), 2u);
  for (const SandboxOptions* o : {&a, &b}) {
    auto made = rt_->Create(*o);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_TRUE(made->started_ahead);
    EXPECT_EQ(rt_->Info(made->id)->resources.memory_bytes, o->resources.memory_bytes);
    ASSERT_TRUE(rt_->Destroy(made->id).ok());
  }
  // A third kind asked for once takes nothing and replaces nothing (start_ahead_kinds = 2).
  auto once = rt_->Create(c);
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_FALSE(once->started_ahead);
  ASSERT_TRUE(rt_->Destroy(once->id).ok());
  for (int i = 0; i < 500 && UnlistedSandboxes().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const SandboxOptions* o : {&a, &b}) {
    auto made = rt_->Create(*o);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_TRUE(made->started_ahead);
    ASSERT_TRUE(rt_->Destroy(made->id).ok());
  }
}

TEST_F(StartAheadTest, ItsWallClockStartsWhenItIsHandedOut) {
  SandboxOptions o;
  o.resources.timeout_ms = 1500;
  ASSERT_TRUE(WaitStartedAhead(o));
  // Idle longer than its limit before anyone takes it: the limit has not run yet.
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  auto c = rt_->Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->started_ahead);
  std::string out;
  EXPECT_EQ(Run(c->id, "echo alive", &out).exit_code, 0);
  EXPECT_EQ(out, "alive\n");
  ExecOptions e;
  e.argv = {"/bin/sleep", "30"};
  auto r = rt_->Exec(c->id, e, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reason, StopReason::kTimeout);
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
}

TEST_F(StartAheadTest, ADeadOneIsNotHandedOutAndLeavesNothing) {
  SandboxOptions o;
  ASSERT_TRUE(WaitStartedAhead(o));
  const std::string ahead = *UnlistedSandboxes().begin();
  int init = 0;
  for (const auto& [pid, id] : SandboxProcesses(prefix_)) {
    if (id == ahead) init = pid;
  }
  ASSERT_GT(init, 0);
  ASSERT_EQ(::kill(init, SIGKILL), 0);
  // Dead before the next Create looks: a zombie nobody reaped yet, or gone (killed while it
  // was still being set up, and reaped by the failed start).
  auto state = [&] {
    std::string stat = ReadHostFile("/proc/" + std::to_string(init) + "/stat");
    size_t p = stat.rfind(')');
    return p == std::string::npos || p + 2 >= stat.size() ? 'X' : stat[p + 2];
  };
  for (int i = 0; i < 500 && state() != 'Z' && state() != 'X'; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(state() == 'Z' || state() == 'X') << state();
  auto c = rt_->Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->started_ahead);
  EXPECT_NE(c->id, ahead);
  std::string out;
  EXPECT_EQ(Run(c->id, "echo ok", &out).exit_code, 0);
  EXPECT_EQ(out, "ok\n");
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
  for (const char* h : {"memory", "pids", "unified", ""}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(std::string("/sys/fs/cgroup/") + h + "/" + prefix_, ec)) {
      EXPECT_FALSE(absl::EndsWith(e.path().filename().string(), "." + ahead)) << e.path();
    }
  }
}

TEST_F(StartAheadTest, ClosingTheRuntimeDestroysTheOneStartedAhead) {
  SandboxOptions o;
  ASSERT_TRUE(WaitStartedAhead(o));
  ASSERT_FALSE(SandboxProcesses(prefix_).empty());
  rt_.reset();
  EXPECT_TRUE(SandboxProcesses(prefix_).empty());
  for (const char* h : {"memory", "pids", "unified", ""}) {
    std::error_code ec;
    EXPECT_FALSE(std::filesystem::exists(std::string("/sys/fs/cgroup/") + h + "/" + prefix_, ec)) << h;
  }
}

}  // namespace
}  // namespace flotilla::sandbox
