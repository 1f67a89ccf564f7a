// RunSchedulerLink: the node's side of RegisterNode + Heartbeat (scheduler.proto).
#include <grpcpp/grpcpp.h>

#include <thread>

#include "flotilla/proto/scheduler.grpc.pb.h"
#include "flotilla/sandbox/node_agent.h"

namespace flotilla::sandbox {

absl::Status RunSchedulerLink(NodeAgent& agent, const std::string& scheduler_address, const std::string& node_id,
                              const std::string& advertised_address, const std::function<bool()>& stop) {
  auto channel = grpc::CreateChannel(scheduler_address, grpc::InsecureChannelCredentials());
  auto stub = v1::Scheduler::NewStub(channel);
  v1::RegisterNodeRequest reg;
  reg.set_node_id(node_id);
  reg.set_address(advertised_address);
  *reg.mutable_usage() = agent.Usage();
  v1::RegisterNodeResponse reg_resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = stub->RegisterNode(&ctx, reg, &reg_resp);
  if (!s.ok()) {
    return absl::UnavailableError("registering with the scheduler at " + scheduler_address + ": " + s.error_message());
  }
  const auto interval = std::chrono::milliseconds(reg_resp.heartbeat_interval_ms() ? reg_resp.heartbeat_interval_ms() : 1000);
  while (!stop()) {
    v1::HeartbeatRequest hb;
    hb.set_node_id(node_id);
    *hb.mutable_usage() = agent.Usage();
    for (const std::string& id : agent.SandboxIds()) hb.add_sandbox_ids(id);
    v1::HeartbeatResponse resp;
    grpc::ClientContext hctx;
    hctx.set_deadline(std::chrono::system_clock::now() + interval);
    (void)stub->Heartbeat(&hctx, hb, &resp);  // a missed beat is retried at the next interval
    for (auto slept = std::chrono::milliseconds(0); slept < interval && !stop(); slept += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::sandbox
