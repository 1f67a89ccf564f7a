// A Runtime shared by a test suite, on a temporary state dir with its own cgroup prefix.
// Tests that need root or kernel features skip with the reason when they are missing.
#pragma once

#include <unistd.h>

#include <memory>
#include <string>

#include "flotilla/common/ids.h"
#include "flotilla/sandbox/runtime.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::sandbox::testing {

class SandboxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new flotilla::testing::TempDir();
    RuntimeOptions o;
    o.state_dir = dir_->path().string();
    o.cgroup_prefix = "flotilla-test-" + std::to_string(::getpid());
    o.default_memory_bytes = 256ull << 20;
    o.default_disk_bytes = 64ull << 20;
    o.default_pids = 128;
    auto rt = Runtime::Open(o);
    if (!rt.ok()) {
      skip_reason_ = new std::string(rt.status().ToString());
      return;
    }
    runtime_ = rt->release();
  }
  static void TearDownTestSuite() {
    delete runtime_;
    runtime_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (runtime_ == nullptr) GTEST_SKIP() << "sandbox runtime unavailable: " << (skip_reason_ ? *skip_reason_ : "");
  }

  static Runtime& rt() { return *runtime_; }
  static std::string state_dir() { return dir_->path().string(); }

  // Runs argv and collects stdout/stderr.
  static ExecResult Run(const std::string& id, std::vector<std::string> argv, std::string* out = nullptr,
                        std::string* err = nullptr, ExecOptions opts = {}) {
    opts.argv = std::move(argv);
    auto r = runtime_->Exec(id, opts, [&](OutputStream s, std::string_view d) {
      if (s == OutputStream::kStdout && out) out->append(d);
      if (s == OutputStream::kStderr && err) err->append(d);
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ExecResult{};
  }
  static std::string Sh(const std::string& id, const std::string& script, ExecResult* result = nullptr) {
    std::string out;
    ExecResult r = Run(id, {"/bin/sh", "-c", script}, &out);
    if (result) *result = r;
    return out;
  }

  static inline Runtime* runtime_ = nullptr;
  static inline flotilla::testing::TempDir* dir_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
};

// Creates a sandbox for one test and destroys it at the end.
class ScopedSandbox {
 public:
  explicit ScopedSandbox(Runtime& rt, SandboxOptions o = {}) : rt_(rt) {
    auto r = rt.Create(o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) id_ = r->id;
  }
  ~ScopedSandbox() {
    if (!id_.empty()) (void)rt_.Destroy(id_);
  }
  const std::string& id() const { return id_; }
  bool ok() const { return !id_.empty(); }

 private:
  Runtime& rt_;
  std::string id_;
};

}  // namespace flotilla::sandbox::testing
