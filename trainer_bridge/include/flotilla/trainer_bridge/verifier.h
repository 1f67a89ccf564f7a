// Verifier: turns responses into rewards. SandboxVerifier runs the task family's check script
// inside a sandbox that it reaches through the NodeAgent API (worker::SandboxClient, the one
// door into sandboxes: a node agent's address, or the embedded node's in-process channel), so a
// response is judged in isolation and the truth is recomputed there from the prompt (for file
// tasks, the reference answer is passed in). A broken sandbox is replaced once, then reported.
//
// Thread-safe: Verify may be called from several threads; each call is one Exec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::trainer_bridge {

struct VerifyItem {
  std::string family;     // "arith", "copy", "file"
  std::string prompt;
  std::string reference;  // used by "file" only
  std::string response;   // the decoded generated text, without special tokens
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  // One reward in [0, 1] per item, in order.
  virtual absl::StatusOr<std::vector<double>> Verify(const std::vector<VerifyItem>& items) = 0;
};

// The check script (POSIX sh) the sandbox runs: one "family prompt reference response" line in
// (fields separated by the ASCII unit separator, 0x1f), one "1" or "0" line out.
const std::string& VerifierScript();

class SandboxVerifier final : public Verifier {
 public:
  // Creates the verifier's sandbox (policy `policy_name`, no network) and installs the script.
  // `sandboxes` is not owned and must outlive the verifier.
  static absl::StatusOr<std::unique_ptr<SandboxVerifier>> Create(worker::SandboxClient& sandboxes,
                                                                 const std::string& policy_name);
  ~SandboxVerifier() override;
  SandboxVerifier(const SandboxVerifier&) = delete;
  SandboxVerifier& operator=(const SandboxVerifier&) = delete;

  absl::StatusOr<std::vector<double>> Verify(const std::vector<VerifyItem>& items) override;
  [[nodiscard]] std::string sandbox_id() const;
  [[nodiscard]] uint64_t execs() const { return execs_.load(); }

 private:
  SandboxVerifier(worker::SandboxClient& sandboxes, std::string policy)
      : sandboxes_(sandboxes), policy_(std::move(policy)) {}
  absl::Status Recreate();
  absl::StatusOr<std::vector<double>> RunOnce(const std::string& id, const std::string& input, size_t n);

  worker::SandboxClient& sandboxes_;
  const std::string policy_;
  mutable absl::Mutex mu_;
  std::string sandbox_id_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> execs_{0};
};

}  // namespace flotilla::trainer_bridge
