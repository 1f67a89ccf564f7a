// EmbeddedNode: the embedded default's node: a sandbox Runtime under a NodeAgent, served on an
// in-process gRPC channel (and, with a listen address, on a loopback port the scheduler reaches
// it at), so the worker, the verifier and the scheduler reach sandboxes through the same
// NodeAgent API as they would a remote node. With a scheduler address it registers and sends
// heartbeats like a `flotilla node` on another host.
//
// Thread-safety: channel() and address() are thread-safe. Stopping or destroying the node
// destroys every sandbox.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "flotilla/admission/admission_check.h"
#include "flotilla/common/metrics.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace flotilla::node {
class NodeAgent;
}
namespace flotilla::sandbox {
class Runtime;
}

namespace flotilla::app {

struct EmbeddedNodeOptions {
  std::string state_dir;
  // Where image layers live when not under state_dir (built environments); empty: state_dir.
  std::string image_dir;
  // Empty: derived from state_dir, so two nodes on one host never share cgroups and a
  // restarted process finds what its predecessor left.
  std::string cgroup_prefix;
  // Removes what an earlier process with the same state directory and prefix left.
  bool cleanup_leftovers = false;
  std::string node_id = "embedded";
  // Also serve on this address (host:port; port 0 picks one); empty: in-process only.
  std::string listen;
  // Register with this scheduler and heartbeat (needs `listen`); empty: no scheduler.
  std::string scheduler_address;
  // The node's admission (the scheduler predicting it must use the same figures).
  admission::AdmissionConfig admission;
  // The node agent's figures go here (borrowed; must outlive the node); null: none.
  MetricsRegistry* metrics = nullptr;
  // Sandboxes that ended cleanly kept reset for the next sample with the same options
  // (sandbox::RuntimeOptions::warm_pool_size): a sample then acquires and releases one instead
  // of paying a create and a destroy. As many as a node runs at once (an RL run's in-flight
  // bound); each idle one costs about 0.9 MiB of host memory.
  uint32_t warm_pool_size = 512;
};

class EmbeddedNode {
 public:
  // Unavailable when this host cannot run sandboxes (not root, no user namespaces...).
  static absl::StatusOr<std::unique_ptr<EmbeddedNode>> Start(const EmbeddedNodeOptions& options);
  // In-process only, with the given runtime state and cgroup prefix.
  static absl::StatusOr<std::unique_ptr<EmbeddedNode>> Start(const std::string& state_dir,
                                                             const std::string& cgroup_prefix,
                                                             const std::string& image_dir = "");
  ~EmbeddedNode();
  EmbeddedNode(const EmbeddedNode&) = delete;
  EmbeddedNode& operator=(const EmbeddedNode&) = delete;

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  // "host:port" the node serves on; "" when in-process only.
  const std::string& address() const { return address_; }
  // The node's sandbox runtime (its Timings(), for benchmarks); sandboxes are asked for
  // through channel().
  sandbox::Runtime& runtime();
  // Stops the scheduler link and the server (sandboxes go with the node's destruction).
  void Stop();

 private:
  EmbeddedNode() = default;
  std::unique_ptr<node::NodeAgent> agent_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread link_;
};

}  // namespace flotilla::app
