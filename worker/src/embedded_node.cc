#include "flotilla/worker/embedded_node.h"

#include <grpcpp/grpcpp.h>

#include "flotilla/common/status.h"
#include "flotilla/node/node_agent.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::worker {

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::Start(const std::string& state_dir,
                                                                   const std::string& cgroup_prefix,
                                                                   bool cleanup_leftovers) {
  sandbox::RuntimeOptions ro;
  ro.state_dir = state_dir;
  ro.cgroup_prefix = cgroup_prefix;
  ro.cleanup_leftovers = cleanup_leftovers;
  ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Runtime> runtime, sandbox::Runtime::Open(ro));
  std::unique_ptr<EmbeddedNode> node(new EmbeddedNode());
  node::NodeAgentOptions ao;
  ao.node_id = "embedded";
  ASSIGN_OR_RETURN(node->agent_, node::NodeAgent::Create(std::move(runtime), ao));
  grpc::ServerBuilder builder;
  builder.RegisterService(node->agent_->service());
  builder.SetMaxReceiveMessageSize(512 << 20);  // PutFile of packed agent installs
  node->server_ = builder.BuildAndStart();
  if (node->server_ == nullptr) return absl::InternalError("embedded node: gRPC server did not start");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  node->channel_ = node->server_->InProcessChannel(args);
  return node;
}

EmbeddedNode::~EmbeddedNode() {
  if (server_) server_->Shutdown();
  server_.reset();
  agent_.reset();
}

}  // namespace flotilla::worker
