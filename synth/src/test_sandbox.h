// TestSandbox: one sandbox of a built environment in which the synthesizer runs test suites,
// writes files and probes tasks. Runs under the "no-network" policy, as tasks do.
//
// Not thread-safe; destroys its sandbox when it goes. The runtime outlives it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::synth {

struct ShellRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved as they came
  double seconds = 0;
};

class TestSandbox {
 public:
  // `top` is an environment's top layer ("sha256:<hex>" or "dir:<rootfs>").
  static absl::StatusOr<std::unique_ptr<TestSandbox>> Start(sandbox::Runtime& runtime, const std::string& top);
  ~TestSandbox();
  TestSandbox(const TestSandbox&) = delete;
  TestSandbox& operator=(const TestSandbox&) = delete;

  // Runs a bash script as root in /app; a timeout is a result (timed_out), not an error.
  absl::StatusOr<ShellRun> Run(const std::string& script, uint32_t timeout_ms);
  absl::Status Put(const std::string& path, const std::string& content, uint32_t mode = 0644);
  absl::StatusOr<std::string> Get(const std::string& path);

 private:
  TestSandbox(sandbox::Runtime& runtime, std::string id) : runtime_(runtime), id_(std::move(id)) {}
  sandbox::Runtime& runtime_;
  std::string id_;
};

}  // namespace flotilla::synth
