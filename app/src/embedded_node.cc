#include "flotilla/app/embedded_node.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/node/node_agent.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::app {

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::Start(const std::string& state_dir,
                                                                   const std::string& cgroup_prefix,
                                                                   const std::string& image_dir) {
  EmbeddedNodeOptions o;
  o.state_dir = state_dir;
  o.image_dir = image_dir;
  o.cgroup_prefix = cgroup_prefix;
  return Start(o);
}

sandbox::Runtime& EmbeddedNode::runtime() { return agent_->runtime(); }

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::Start(const EmbeddedNodeOptions& o) {
  if (!o.scheduler_address.empty() && o.listen.empty()) {
    return absl::InvalidArgumentError("embedded node: scheduler_address needs a listen address");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  const std::string state = std::filesystem::absolute(o.state_dir, ec).lexically_normal().string();
  sandbox::RuntimeOptions ro;
  ro.state_dir = state;
  ro.image_dir = o.image_dir;
  ro.cgroup_prefix = !o.cgroup_prefix.empty()
                         ? o.cgroup_prefix
                         : absl::StrFormat("flotilla-x%08x", static_cast<uint32_t>(std::hash<std::string>{}(state)));
  ro.cleanup_leftovers = o.cleanup_leftovers;
  ro.warm_pool_size = o.warm_pool_size;
  ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Runtime> runtime, sandbox::Runtime::Open(ro));
  std::unique_ptr<EmbeddedNode> node(new EmbeddedNode());
  node::NodeAgentOptions ao;
  ao.node_id = o.node_id;
  ao.admission = o.admission;
  ao.metrics = o.metrics;
  ASSIGN_OR_RETURN(node->agent_, node::NodeAgent::Create(std::move(runtime), ao));
  grpc::ServerBuilder builder;
  int port = 0;
  if (!o.listen.empty()) builder.AddListeningPort(o.listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(node->agent_->service());
  builder.SetMaxReceiveMessageSize(512 << 20);  // PutFile of packed agent installs
  node->server_ = builder.BuildAndStart();
  if (node->server_ == nullptr || (!o.listen.empty() && port == 0)) {
    return absl::UnavailableError(absl::StrCat("embedded node: cannot serve on '", o.listen, "'"));
  }
  if (!o.listen.empty()) node->address_ = absl::StrCat(o.listen.substr(0, o.listen.rfind(':')), ":", port);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  node->channel_ = node->server_->InProcessChannel(args);
  if (!o.scheduler_address.empty()) {
    // Registered before Start returns, so the scheduler can place on it at once.
    struct Registration {
      absl::Notification done;
      absl::Status status;
    };
    auto reg = std::make_shared<Registration>();
    EmbeddedNode* self = node.get();
    const std::string node_id = o.node_id, scheduler = o.scheduler_address;
    node->link_ = std::thread([self, reg, node_id, scheduler] {
      absl::Status s = node::RunSchedulerLink(
          *self->agent_, scheduler, node_id, self->address_, [self] { return self->stop_.load(); },
          [reg] { reg->done.Notify(); });
      if (!reg->done.HasBeenNotified()) {
        reg->status = s;
        reg->done.Notify();
      } else if (!s.ok()) {
        FLOG(error, "embedded node: scheduler link ended", {{"error", s.ToString()}});
      }
    });
    reg->done.WaitForNotification();
    if (!reg->status.ok()) return Annotate(reg->status, "embedded node: registering with the scheduler");
  }
  return node;
}

void EmbeddedNode::Stop() {
  stop_ = true;
  if (link_.joinable()) link_.join();
  if (server_) server_->Shutdown();
}

EmbeddedNode::~EmbeddedNode() {
  Stop();
  server_.reset();
  agent_.reset();
}

}  // namespace flotilla::app
