// TestSandbox: one sandbox of a built environment in which the synthesizer runs test suites,
// writes files and probes tasks. Runs under the "no-network" policy, as tasks do, and is
// reached like every task's sandbox: through the NodeAgent API (worker::SandboxClient), placed
// by the scheduler of the embedded platform.
//
// Not thread-safe; destroys its sandbox when it goes. The client outlives it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/sandbox_client.h"

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
  static absl::StatusOr<std::unique_ptr<TestSandbox>> Start(worker::SandboxClient& sandboxes, const std::string& top);
  ~TestSandbox();
  TestSandbox(const TestSandbox&) = delete;
  TestSandbox& operator=(const TestSandbox&) = delete;

  // Runs a bash script as root in /app; a timeout is a result (timed_out), not an error.
  absl::StatusOr<ShellRun> Run(const std::string& script, uint32_t timeout_ms);
  absl::Status Put(const std::string& path, const std::string& content, uint32_t mode = 0644);
  absl::StatusOr<std::string> Get(const std::string& path);

 private:
  TestSandbox(worker::SandboxClient& sandboxes, std::string id) : sandboxes_(sandboxes), id_(std::move(id)) {}
  worker::SandboxClient& sandboxes_;
  std::string id_;
};

}  // namespace flotilla::synth
