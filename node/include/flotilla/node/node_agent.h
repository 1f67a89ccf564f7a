// The NodeAgent gRPC service (flotilla.v1.NodeAgent in sandbox.proto) over a sandbox Runtime,
// with node-local admission and usage reporting: the one door into sandboxes. Every caller (the
// scheduler, the worker, the verifier) reaches a node's sandboxes through this API, over a
// network channel or, in the embedded default, an in-process one.
//
//   ASSIGN_OR_RETURN(auto agent, NodeAgent::Create(std::move(runtime), {.node_id = "n1"}));
//   ASSIGN_OR_RETURN(auto server, NodeAgentServer::Start(agent.get(), "127.0.0.1:0"));
//   server->port();   // the bound port
//
// Create admits a sandbox only when AdmissionCheck says the node stays under its warning
// thresholds (RESOURCE_EXHAUSTED with the figures otherwise). Usage reports memory and CPU
// committed by sandboxes against the host's capacity, cut into NUMA partitions read from
// /sys/devices/system/node (one per node, or `partitions_per_node` sub-NUMA slices).
//
// Thread-safety: NodeAgent is thread-safe; gRPC calls run concurrently. It owns the Runtime.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/admission/admission_check.h"
#include "flotilla/common/metrics.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::node {

struct NodeAgentOptions {
  std::string node_id;
  admission::AdmissionConfig admission;
  uint32_t slots_capacity = 2500;   // idle sandboxes the node holds
  uint32_t partitions_per_node = 1; // sub-NUMA partitions per NUMA node
  std::string sysfs_root = "/sys";  // NUMA topology source (tests point it at a fixture)
  // Sandboxes created, destroyed, failed and live, create/destroy latency, crashes and stopped
  // commands by reason (node_metrics.h lists the families). Borrowed; must outlive the agent.
  MetricsRegistry* metrics = nullptr;
};

// The host's capacity and NUMA partitions with nothing used. `sysfs_root` is normally "/sys".
absl::StatusOr<v1::NodeUsage> ReadNodeCapacity(const std::string& sysfs_root, uint32_t slots_capacity,
                                               uint32_t partitions_per_node);

class NodeAgent {
 public:
  static absl::StatusOr<std::unique_ptr<NodeAgent>> Create(std::unique_ptr<sandbox::Runtime> runtime,
                                                           const NodeAgentOptions& options);
  virtual ~NodeAgent() = default;

  // The gRPC service; owned by the agent.
  virtual grpc::Service* service() = 0;
  virtual sandbox::Runtime& runtime() = 0;
  // Current usage (capacity minus what admitted sandboxes committed).
  [[nodiscard]] virtual v1::NodeUsage Usage() const = 0;
  [[nodiscard]] virtual std::vector<std::string> SandboxIds() const = 0;
  // Heartbeat hook: called (on the changing thread) after every admitted create and destroy.
  virtual void SetUsageListener(std::function<void(const v1::NodeUsage&)> listener) = 0;
};

// A gRPC server for one agent. Shutdown on destruction.
class NodeAgentServer {
 public:
  static absl::StatusOr<std::unique_ptr<NodeAgentServer>> Start(NodeAgent* agent, const std::string& listen);
  virtual ~NodeAgentServer() = default;
  virtual int port() const = 0;
  virtual void Wait() = 0;
  virtual void Shutdown() = 0;
};

// Registers the node with a scheduler and sends a heartbeat (usage + sandbox ids) every
// interval the scheduler asks for, until `stop()` returns true. Returns when stopped or when
// the scheduler cannot be reached at registration. `on_registered` (may be empty) runs once,
// on this thread, after the first registration succeeded.
absl::Status RunSchedulerLink(NodeAgent& agent, const std::string& scheduler_address, const std::string& node_id,
                              const std::string& advertised_address, const std::function<bool()>& stop,
                              const std::function<void()>& on_registered = nullptr);

}  // namespace flotilla::node
