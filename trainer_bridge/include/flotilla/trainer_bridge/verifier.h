// Verifier: turns responses into rewards. SandboxVerifier runs the task family's check script
// inside a sandbox through the NodeAgent API (common/proto/sandbox.proto), so a response is
// judged in isolation and the truth is recomputed there from the prompt (for file tasks, the
// reference answer is passed in).
//
// Thread-safe: Verify may be called from several threads; each call is one Exec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.grpc.pb.h"

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

// The check script (POSIX sh) the sandbox runs: one "family\tprompt\treference\tresponse" line
// in, one "1" or "0" line out.
const std::string& VerifierScript();

class SandboxVerifier final : public Verifier {
 public:
  // Creates the verifier's sandbox (policy `policy_name`, no network) and installs the script.
  static absl::StatusOr<std::unique_ptr<SandboxVerifier>> Create(std::shared_ptr<v1::NodeAgent::StubInterface> agent,
                                                                 const std::string& policy_name);
  ~SandboxVerifier() override;
  SandboxVerifier(const SandboxVerifier&) = delete;
  SandboxVerifier& operator=(const SandboxVerifier&) = delete;

  absl::StatusOr<std::vector<double>> Verify(const std::vector<VerifyItem>& items) override;
  [[nodiscard]] const std::string& sandbox_id() const { return sandbox_id_; }
  [[nodiscard]] uint64_t execs() const { return execs_.load(); }

 private:
  SandboxVerifier(std::shared_ptr<v1::NodeAgent::StubInterface> agent, std::string id)
      : agent_(std::move(agent)), sandbox_id_(std::move(id)) {}
  std::shared_ptr<v1::NodeAgent::StubInterface> agent_;
  std::string sandbox_id_;
  std::atomic<uint64_t> execs_{0};
};

}  // namespace flotilla::trainer_bridge
