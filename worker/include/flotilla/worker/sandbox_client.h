// SandboxClient: the worker's only way into sandboxes, the NodeAgent gRPC API
// (common/proto/sandbox.proto). Two ways to get one:
//   SandboxClient(channel)          one node's agent (its address, or the embedded node's
//                                   in-process channel): Create asks that node directly;
//   SandboxClient::ThroughScheduler the scheduler's front door: Create is the Scheduler's
//                                   CreateSandbox (placement, admission, retries elsewhere),
//                                   Destroy its DeleteSandbox, and everything in between goes
//                                   to the NodeAgent of the node the sandbox was placed on.
//
// Thread-safety: thread-safe (gRPC stubs are; the placements are under a mutex).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/proto/scheduler.grpc.pb.h"

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
  // Sandboxes placed by the scheduler reached over `scheduler`; `tenant` routes the requests
  // to a scale unit (an experiment's name).
  static std::unique_ptr<SandboxClient> ThroughScheduler(std::shared_ptr<grpc::Channel> scheduler,
                                                         std::string tenant);
  SandboxClient(const SandboxClient&) = delete;
  SandboxClient& operator=(const SandboxClient&) = delete;

  // Through the scheduler, a request with a sandbox_id, extra_allow rules or a NUMA partition
  // is InvalidArgument naming the field (the scheduler chooses those, or cannot carry them).
  absl::StatusOr<std::string> Create(const v1::CreateRequest& request);
  // Runs a command to completion; `on_stdout` (nullable) sees stdout chunks as they arrive.
  absl::StatusOr<ExecOutcome> Exec(const v1::ExecRequest& request,
                                   const std::function<void(std::string_view)>& on_stdout = nullptr);
  absl::Status PutFile(const std::string& sandbox_id, const std::string& path,
                       std::string_view content, uint32_t mode);
  absl::StatusOr<std::string> GetFile(const std::string& sandbox_id, const std::string& path,
                                      uint64_t max_bytes);
  absl::Status Destroy(const std::string& sandbox_id);

  // The node a sandbox was placed on ("" for a client of one node).
  [[nodiscard]] std::string NodeOf(const std::string& sandbox_id) const;

 private:
  SandboxClient() = default;
  // The NodeAgent stub holding `sandbox_id`: the one node's, or the placed node's.
  absl::StatusOr<std::shared_ptr<v1::NodeAgent::Stub>> StubFor(const std::string& sandbox_id) const;

  std::shared_ptr<v1::NodeAgent::Stub> stub_;  // one node's; null through the scheduler
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::string tenant_;
  struct Placed {
    std::string node_id;
    std::shared_ptr<v1::NodeAgent::Stub> stub;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Placed> placed_ ABSL_GUARDED_BY(mu_);                      // by sandbox id
  absl::flat_hash_map<std::string, std::shared_ptr<v1::NodeAgent::Stub>> nodes_ ABSL_GUARDED_BY(mu_);  // by address
};

}  // namespace flotilla::worker
