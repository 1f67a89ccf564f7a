// EmbeddedNode: the embedded default's sandboxes: a sandbox Runtime under a NodeAgent, served
// on an in-process gRPC channel, so the worker reaches sandboxes through the same NodeAgent
// API as it would a remote node.
//
// Thread-safety: channel() is thread-safe. Destroying the node destroys every sandbox.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace flotilla::sandbox {
class NodeAgent;
}

namespace flotilla::worker {

class EmbeddedNode {
 public:
  // Unavailable when this host cannot run sandboxes (not root, no user namespaces...).
  // `image_dir`: where image layers live when not under state_dir (built environments).
  static absl::StatusOr<std::unique_ptr<EmbeddedNode>> Start(const std::string& state_dir,
                                                             const std::string& cgroup_prefix,
                                                             const std::string& image_dir = "");
  ~EmbeddedNode();
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  EmbeddedNode() = default;
  std::unique_ptr<sandbox::NodeAgent> agent_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace flotilla::worker
