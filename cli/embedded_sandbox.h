// The sandbox node agent the experiment's verifier uses, served in-process (embedded default)
// or reached over gRPC at an address.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.grpc.pb.h"

namespace flotilla::cli {

// Owns whatever serves the agent (runtime, in-process server); the stub is valid while it lives.
class EmbeddedSandbox {
 public:
  virtual ~EmbeddedSandbox() = default;
  virtual std::shared_ptr<v1::NodeAgent::StubInterface> stub() = 0;
};

// `address` non-empty: a remote node agent. Otherwise the sandbox runtime runs in this process
// with its state under `state_dir`.
absl::StatusOr<std::unique_ptr<EmbeddedSandbox>> StartSandbox(const std::string& address, const std::string& state_dir);

}  // namespace flotilla::cli
