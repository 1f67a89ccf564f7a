// The static zygote (flotilla-zygote, cli/zygote_main.cc) as a runtime's
// RuntimeOptions::zygote_binary: the inits it clones run commands under the policy (Landlock and
// seccomp applied by the in-child steps linked into it), and each maps only the static
// executable's few areas.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "own_runtime.h"

namespace flotilla::sandbox {
namespace {

// Set by tests/sandbox/CMakeLists.txt; empty where the toolchain could not link it.
constexpr const char kZygoteBinary[] = FLOTILLA_ZYGOTE_BINARY;

// Far above an init of the static zygote (about a dozen areas), below a copy of the dynamically
// linked `flotilla` (about thirty).
constexpr int kMaxInitMappings = 20;

// The pid of the init of sandbox `id` (the process named flotilla-init among its processes);
// 0 when there is none.
pid_t InitOf(const std::string& prefix, const std::string& id) {
  for (const auto& [pid, sandbox] : testing::SandboxProcesses(prefix)) {
    if (sandbox == id && testing::ReadHostFile("/proc/" + std::to_string(pid) + "/comm") == "flotilla-init\n") return pid;
  }
  return 0;
}

class StaticZygoteTest : public testing::OwnRuntimeTest {
 protected:
  void SetUp() override {
    if (kZygoteBinary[0] == '\0') GTEST_SKIP() << "flotilla-zygote was not built (no static libc here)";
    RuntimeOptions o;
    o.zygote_binary = kZygoteBinary;
    OpenRuntime("flotilla-test-zygote", o);
  }
};

TEST_F(StaticZygoteTest, InitsRunCommandsUnderTheDefaultPolicy) {
  SandboxOptions so;
  so.policy_name = "default";
  auto c = rt_->Create(so);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(std::find(c->enforcers_active.begin(), c->enforcers_active.end(), "seccomp"), c->enforcers_active.end());
  EXPECT_NE(std::find(c->enforcers_active.begin(), c->enforcers_active.end(), "landlock"),
            c->enforcers_active.end());
  std::string out, err;
  ExecResult r = Run(c->id, "echo ok", &out, &err);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(out, "ok\n");
  EXPECT_EQ(err, "");
  // Seccomp (docker_default) still refuses a new user namespace: unshare(1) exits 1.
  out.clear();
  err.clear();
  r = Run(c->id, "unshare -U true 2>/dev/null; echo unshare_user=$?; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status",
          &out, &err);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(out, "unshare_user=1\nNoNewPrivs:\t1\nSeccomp:\t2\n");
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
}

// A policy whose filesystem is read-only but for /tmp: the init's Landlock step (applied from
// the encoded plan by the static zygote's code) is what refuses the write, since root in the
// sandbox could otherwise write anywhere in its own overlay.
TEST_F(StaticZygoteTest, InitsApplyTheLandlockPlan) {
  SandboxOptions so;
  so.policy_yaml =
      "name: zygote-landlock\n"
      "filesystem:\n"
      "  read_only: [/]\n"
      "  read_write: [/tmp]\n"
      "syscalls:\n"
      "  base: docker_default\n";
  auto c = rt_->Create(so);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string out, err;
  ExecResult r = Run(c->id, "touch /tmp/a && echo tmp=ok; touch /etc/a; echo etc=$?", &out, &err);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(out, "tmp=ok\netc=1\n") << err;
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
}

TEST_F(StaticZygoteTest, AnInitIsACopyOfTheStaticZygoteWithFewMappings) {
  auto c = rt_->Create(SandboxOptions{});
  ASSERT_TRUE(c.ok()) << c.status();
  std::string out, err;
  ASSERT_EQ(Run(c->id, "true", &out, &err).exit_code, 0);  // set up and idle
  const pid_t init = InitOf(prefix_, c->id);
  ASSERT_GT(init, 0);
  char exe[PATH_MAX];
  ssize_t n = ::readlink(("/proc/" + std::to_string(init) + "/exe").c_str(), exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::filesystem::weakly_canonical(std::string(exe, static_cast<size_t>(n))),
            std::filesystem::weakly_canonical(kZygoteBinary));
  const std::string maps = testing::ReadHostFile("/proc/" + std::to_string(init) + "/maps");
  const int mappings = static_cast<int>(std::count(maps.begin(), maps.end(), '\n'));
  EXPECT_GT(mappings, 0);
  EXPECT_LE(mappings, kMaxInitMappings) << maps;
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
}

}  // namespace
}  // namespace flotilla::sandbox
