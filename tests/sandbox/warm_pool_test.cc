// The warm pool's bookkeeping and pace (RuntimeOptions::warm_pool_size): Runtime::Timings counts
// every phase of a create, a destroy and a reset exactly; sandboxes given back together are
// reset side by side (more recyclers than the first four, several zygotes) and handed out
// fresh. What a reused sandbox must not see of the previous sample is the attack suite's
// (tests/attack/process_attack_test.cc, WarmPoolAttackTest).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "own_runtime.h"

namespace flotilla::sandbox {
namespace {

// The number of this process's children named `name`.
int ChildrenNamed(const std::string& name) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "status");
    std::string line, comm;
    long ppid = -1;
    while (std::getline(f, line)) {
      if (absl::StartsWith(line, "Name:\t")) comm = line.substr(6);
      if (absl::StartsWith(line, "PPid:")) ppid = std::atol(line.c_str() + 5);
    }
    n += comm == name && ppid == ::getpid() ? 1 : 0;
  }
  return n;
}

class WarmPoolTest : public testing::OwnRuntimeTest {
 protected:
  void Open(uint32_t pool) {
    RuntimeOptions o;
    o.warm_pool_size = pool;
    o.start_ahead = false;  // only the pool starts sandboxes in the background
    OpenRuntime("flotilla-pool", o);
  }
  // Waits (bounded) until `done` holds for the runtime's timings.
  template <typename F>
  bool WaitTimings(F done) {
    for (int i = 0; i < 3000; ++i) {
      if (done(rt_->Timings())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  std::string Hostname(const std::string& id) {
    std::string out;
    ExecResult r = Run(id, "cat /proc/sys/kernel/hostname; ls /tmp", &out);
    EXPECT_EQ(r.exit_code, 0) << out;
    return out;
  }
};

TEST_F(WarmPoolTest, TimingsCountEveryPhaseOfCreateDestroyAndReset) {
  Open(2);
  SandboxOptions o;
  auto a = rt_->Create(o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->reused);
  // None was ready: the pool grows by one for these options.
  ASSERT_TRUE(WaitTimings([](const RuntimeTimings& t) { return t.pool_grow.count == 1; }));
  ASSERT_TRUE(rt_->Destroy(a->id).ok());
  ASSERT_TRUE(WaitTimings([](const RuntimeTimings& t) { return t.reset_start.count == 1; }));
  auto b = rt_->Create(o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->reused);
  EXPECT_EQ(Hostname(b->id), b->id + "\n");
  ASSERT_TRUE(rt_->Destroy(b->id).ok());
  ASSERT_TRUE(WaitTimings([](const RuntimeTimings& t) { return t.reset_start.count == 2; }));
  const RuntimeTimings t = rt_->Timings();
  EXPECT_EQ(t.create_cold.count, 1u);
  EXPECT_EQ(t.create_warm.count, 1u);
  EXPECT_EQ(t.create_waited.count, 0u);  // one was ready
  EXPECT_EQ(t.destroy.count, 2u);
  EXPECT_EQ(t.reset_exit.count, 2u);
  EXPECT_EQ(t.pool_grow.count, 1u);
  // a, the one grown, and the two resets: four inits started, each in three timed phases.
  EXPECT_EQ(t.start_layer.count, 4u);
  EXPECT_EQ(t.start_spawn.count, 4u);
  EXPECT_EQ(t.start_setup.count, 4u);
  EXPECT_GT(t.create_cold.ms, 0.0);
  EXPECT_GT(t.start_setup.ms, 0.0);
}

TEST_F(WarmPoolTest, SandboxesGivenBackTogetherAreResetSideBySideAndHandedOutFresh) {
  constexpr int kN = 8;
  Open(2 * kN);
  ASSERT_EQ(ChildrenNamed("flotilla-zygote"), 4) << "a runtime with a warm pool clones from four zygotes";
  SandboxOptions o;
  std::vector<std::string> first(kN);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kN; ++i) {
      threads.emplace_back([&, i] {
        auto c = rt_->Create(o);
        if (c.ok()) first[i] = c->id;
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_FALSE(first[i].empty());
    std::string out;
    ASSERT_EQ(Run(first[i], "echo left > /tmp/mark", &out).exit_code, 0) << out;
  }
  const uint64_t resets_before = rt_->Timings().reset_start.count;
  for (const std::string& id : first) ASSERT_TRUE(rt_->Destroy(id).ok());
  ASSERT_TRUE(WaitTimings([&](const RuntimeTimings& t) { return t.reset_start.count == resets_before + kN; }))
      << rt_->Timings().reset_start.count - resets_before << " of " << kN << " reset";
  std::vector<std::string> second(kN);
  std::vector<int> reused(kN, 0);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kN; ++i) {
      threads.emplace_back([&, i] {
        auto c = rt_->Create(o);
        if (!c.ok()) return;
        second[i] = c->id;
        reused[i] = c->reused ? 1 : 0;
      });
    }
    for (auto& t : threads) t.join();
  }
  std::set<std::string> ids;
  for (int i = 0; i < kN; ++i) {
    ASSERT_FALSE(second[i].empty());
    EXPECT_EQ(reused[i], 1) << second[i];
    // Its own name, and nothing in /tmp of the sample before it.
    EXPECT_EQ(Hostname(second[i]), second[i] + "\n");
    ids.insert(second[i]);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kN));
  for (const std::string& id : second) EXPECT_TRUE(rt_->Destroy(id).ok());
}

TEST_F(WarmPoolTest, PoolGrowsAheadWhenACreateTakesTheLastReadyOneWhileOthersReset) {
  Open(8);
  SandboxOptions o;
  auto a = rt_->Create(o);
  ASSERT_TRUE(a.ok()) << a.status();
  // None was ready: the pool grows by one.
  ASSERT_TRUE(WaitTimings([](const RuntimeTimings& t) { return t.pool_grow.count == 1; }));
  // a goes back to be reset; while it is, b takes the one ready sandbox, the last: the next
  // Create would wait for a's reset, so one more starts now.
  ASSERT_TRUE(rt_->Destroy(a->id).ok());
  auto b = rt_->Create(o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->reused);
  ASSERT_TRUE(WaitTimings([](const RuntimeTimings& t) { return t.pool_grow.count == 2 && t.reset_start.count == 1; }))
      << rt_->Timings().pool_grow.count << " grown";
  // Two ready (a's reset, the one grown): two Creates wait for nothing, and the second, taking
  // the last with none being reset, grows nothing.
  auto c = rt_->Create(o);
  auto d = rt_->Create(o);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_TRUE(c->reused);
  EXPECT_TRUE(d->reused);
  const RuntimeTimings t = rt_->Timings();
  EXPECT_EQ(t.pool_grow.count, 2u);
  EXPECT_EQ(t.create_waited.count, 0u);
  EXPECT_EQ(t.create_cold.count, 1u);
  EXPECT_EQ(t.create_warm.count, 3u);
  EXPECT_EQ(t.reset_queued.count, 1u);
  for (const auto& id : {b->id, c->id, d->id}) EXPECT_TRUE(rt_->Destroy(id).ok());
}

}  // namespace
}  // namespace flotilla::sandbox
