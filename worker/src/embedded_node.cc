#include "flotilla/worker/embedded_node.h"

#include <grpcpp/grpcpp.h>

#include "flotilla/common/status.h"
#include "flotilla/sandbox/node_agent.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::worker {

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::Start(const std::string& state_dir,
                                                                   const std::string& cgroup_prefix,
                                                                   const std::string& image_dir) {
  sandbox::RuntimeOptions ro;
  ro.state_dir = state_dir;
  ro.image_dir = image_dir;
  ro.cgroup_prefix = cgroup_prefix;
  ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Runtime> runtime, sandbox::Runtime::Open(ro));
  std::unique_ptr<EmbeddedNode> node(new EmbeddedNode());
  sandbox::NodeAgentOptions ao;
  ao.node_id = "embedded";
  ASSIGN_OR_RETURN(node->agent_, sandbox::NodeAgent::Create(std::move(runtime), ao));
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
