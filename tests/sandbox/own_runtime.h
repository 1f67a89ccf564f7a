// A test's own Runtime (its own state dir and cgroup prefix), and what the host shows of its
// sandboxes' processes. Tests skip with the reason when the runtime cannot open here.
#pragma once

#include <unistd.h>

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

namespace flotilla::sandbox::testing {

inline std::string ReadHostFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Host pid -> sandbox id, for every process in a cgroup "<prefix>/<instance>.<id>" of any
// hierarchy (v1 or v2).
inline std::map<int, std::string> SandboxProcesses(const std::string& prefix) {
  std::map<int, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !absl::ascii_isdigit(name[0])) continue;
    for (absl::string_view line : absl::StrSplit(ReadHostFile(e.path().string() + "/cgroup"), '\n')) {
      size_t at = line.find("/" + prefix + "/");
      if (at == absl::string_view::npos) continue;
      absl::string_view leaf = line.substr(at + prefix.size() + 2);
      leaf = leaf.substr(0, leaf.find('/'));
      size_t dot = leaf.find('.');
      if (dot != absl::string_view::npos) out[std::stoi(name)] = std::string(leaf.substr(dot + 1));
    }
  }
  return out;
}

class OwnRuntimeTest : public ::testing::Test {
 protected:
  // Opens rt_ with `o` on the test's state dir and the cgroup prefix "<name>-<pid>", with
  // small default limits; skips the test when the runtime is unavailable.
  void OpenRuntime(const std::string& name, RuntimeOptions o = {}) {
    o.state_dir = dir_.path().string();
    prefix_ = name + "-" + std::to_string(::getpid());
    o.cgroup_prefix = prefix_;
    o.default_memory_bytes = 256ull << 20;
    o.default_disk_bytes = 64ull << 20;
    auto rt = Runtime::Open(o);
    if (!rt.ok()) GTEST_SKIP() << "sandbox runtime unavailable: " << rt.status();
    rt_ = std::move(*rt);
  }

  // Runs `script` with /bin/sh -c in sandbox `id`, collecting its output.
  ExecResult Run(const std::string& id, const std::string& script, std::string* out, std::string* err = nullptr) {
    ExecOptions e;
    e.argv = {"/bin/sh", "-c", script};
    auto r = rt_->Exec(id, e, [&](OutputStream s, std::string_view d) {
      if (s == OutputStream::kStdout) out->append(d);
      if (s == OutputStream::kStderr && err != nullptr) err->append(d);
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ExecResult{};
  }

  flotilla::testing::TempDir dir_;
  std::string prefix_;
  std::unique_ptr<Runtime> rt_;
};

}  // namespace flotilla::sandbox::testing
