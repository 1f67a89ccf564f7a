// SandboxClient: the worker's only way into sandboxes, the NodeAgent gRPC API
// (common/proto/sandbox.proto), over any channel: a node agent's address or the in-process
// channel of the embedded default.
//
// Thread-safety: thread-safe (gRPC stubs are). The channel is shared.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.grpc.pb.h"

namespace grpc {
class Channel;
}

namespace flotilla::worker {

struct ExecOutcome {
  int exit_code = -1;
  int signal = 0;
  v1::StopReason reason = v1::STOP_REASON_NONE;
  std::string detail;
  std::string output;   // stdout and stderr interleaved as they arrived
  double wall_ms = 0;
};

class SandboxClient {
 public:
  explicit SandboxClient(std::shared_ptr<grpc::Channel> channel);

  absl::StatusOr<std::string> Create(const v1::CreateRequest& request);
  // Runs a command to completion; `on_stdout` (nullable) sees stdout chunks as they arrive.
  absl::StatusOr<ExecOutcome> Exec(const v1::ExecRequest& request,
                                   const std::function<void(std::string_view)>& on_stdout = nullptr);
  absl::Status PutFile(const std::string& sandbox_id, const std::string& path,
                       std::string_view content, uint32_t mode);
  absl::StatusOr<std::string> GetFile(const std::string& sandbox_id, const std::string& path,
                                      uint64_t max_bytes);
  absl::Status Destroy(const std::string& sandbox_id);

 private:
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

}  // namespace flotilla::worker
