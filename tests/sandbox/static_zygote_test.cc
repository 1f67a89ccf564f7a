// The static zygote (flotilla-zygote, cli/zygote_main.cc) as a runtime's
// RuntimeOptions::zygote_binary: the inits it clones run commands under the policy (Landlock and
// seccomp applied by the in-child steps linked into it), and each maps only the static
// executable's few areas.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "flotilla/sandbox/runtime.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::sandbox {
namespace {

// Set by tests/sandbox/CMakeLists.txt; empty where the toolchain could not link it.
constexpr const char kZygoteBinary[] = FLOTILLA_ZYGOTE_BINARY;

// Far above an init of the static zygote (about a dozen areas), below a copy of the dynamically
// linked `flotilla` (about thirty).
constexpr int kMaxInitMappings = 20;

std::string ReadHost(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The pid of the init of sandbox `id`: the process named flotilla-init in a cgroup
// "<prefix>/<instance>.<id>" of any hierarchy; 0 when there is none.
pid_t InitOf(const std::string& prefix, const std::string& id) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !absl::ascii_isdigit(name[0])) continue;
    bool in_sandbox = false;
    for (absl::string_view line : absl::StrSplit(ReadHost(e.path().string() + "/cgroup"), '\n')) {
      size_t at = line.find("/" + prefix + "/");
      if (at == absl::string_view::npos) continue;
      absl::string_view leaf = line.substr(at + prefix.size() + 2);
      leaf = leaf.substr(0, leaf.find('/'));
      size_t dot = leaf.find('.');
      if (dot != absl::string_view::npos && leaf.substr(dot + 1) == id) in_sandbox = true;
    }
    if (in_sandbox && ReadHost(e.path().string() + "/comm") == "flotilla-init\n") return std::stoi(name);
  }
  return 0;
}

class StaticZygoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kZygoteBinary[0] == '\0') GTEST_SKIP() << "flotilla-zygote was not built (no static libc here)";
    RuntimeOptions o;
    o.state_dir = dir_.path().string();
    prefix_ = "flotilla-test-zygote-" + std::to_string(::getpid());
    o.cgroup_prefix = prefix_;
    o.default_memory_bytes = 256ull << 20;
    o.default_disk_bytes = 64ull << 20;
    o.zygote_binary = kZygoteBinary;
    auto rt = Runtime::Open(o);
    if (!rt.ok()) GTEST_SKIP() << "sandbox runtime unavailable: " << rt.status();
    rt_ = std::move(*rt);
  }

  ExecResult Run(const std::string& id, const std::string& script, std::string* out, std::string* err) {
    ExecOptions e;
    e.argv = {"/bin/sh", "-c", script};
    auto r = rt_->Exec(id, e, [&](OutputStream s, std::string_view d) {
      (s == OutputStream::kStdout ? out : err)->append(d);
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ExecResult{};
  }

  flotilla::testing::TempDir dir_;
  std::string prefix_;
  std::unique_ptr<Runtime> rt_;
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
  const std::string maps = ReadHost("/proc/" + std::to_string(init) + "/maps");
  const int mappings = static_cast<int>(std::count(maps.begin(), maps.end(), '\n'));
  EXPECT_GT(mappings, 0);
  EXPECT_LE(mappings, kMaxInitMappings) << maps;
  EXPECT_TRUE(rt_->Destroy(c->id).ok());
}

}  // namespace
}  // namespace flotilla::sandbox
