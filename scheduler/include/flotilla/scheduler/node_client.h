// The seam between the scheduler and a node: the real implementation speaks the NodeAgent
// gRPC API (GrpcNodeClient); the simulator's is a SimulatedNode running the same NodeLedger
// admission a node agent runs. Implementations are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/proto/scheduler.pb.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

struct PlaceRequest {
  std::string sandbox_id;
  uint32_t partition = 0;
  ResourceVector request;
  v1::ExecutionClass execution_class = v1::BEST_EFFORT;
  // The caller's full request (image, policy, labels, limits); may be null for simulated nodes.
  const v1::CreateSandboxRequest* spec = nullptr;
};

struct PlaceResult {
  bool admitted = false;
  std::string reason;        // why the node rejected
  NodeUsageSnapshot usage;   // the node's usage as of its decision
};

class NodeClient {
 public:
  virtual ~NodeClient() = default;
  // Asks the node to admit and create the sandbox. A rejection is a PlaceResult with
  // admitted == false; a Status error means the node could not be asked (Unavailable,
  // DeadlineExceeded) or failed to create (Internal...).
  virtual absl::StatusOr<PlaceResult> Place(const PlaceRequest& request) = 0;
  // Destroys a sandbox on the node; NotFound when the node does not have it.
  virtual absl::Status Destroy(const std::string& sandbox_id) = 0;
  virtual absl::StatusOr<NodeUsageSnapshot> Usage() = 0;
  // The node's own list of sandbox ids.
  virtual absl::StatusOr<std::vector<std::string>> List() = 0;
};

// Makes a client for a node registered at `address` (the real one: a gRPC channel).
using NodeClientFactory =
    std::function<absl::StatusOr<std::shared_ptr<NodeClient>>(const std::string& node_id, const std::string& address)>;

}  // namespace flotilla::scheduler
