// SchedulerLink: the node side of the Scheduler protocol.
#include "flotilla/node/scheduler_link.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace flotilla::node {

SchedulerLink::SchedulerLink(const SchedulerLinkOptions& options, SnapshotFn snapshot, UnknownFn on_unknown)
    : options_(options),
      snapshot_(std::move(snapshot)),
      on_unknown_(std::move(on_unknown)),
      stub_(v1::Scheduler::NewStub(grpc::CreateChannel(options.scheduler_address, grpc::InsecureChannelCredentials()))) {
  if (options_.interval_ms > 0) interval_ms_ = options_.interval_ms;
}

absl::Status SchedulerLink::Register() {
  auto [usage, ids] = snapshot_();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms));
  v1::RegisterNodeRequest req;
  req.set_node_id(options_.node_id);
  req.set_address(options_.node_address);
  req.set_scale_unit(options_.scale_unit);
  *req.mutable_usage() = std::move(usage);
  v1::RegisterNodeResponse resp;
  grpc::Status s = stub_->RegisterNode(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("registering with the scheduler at ", options_.scheduler_address, ": ", s.error_message()));
  }
  if (options_.interval_ms == 0 && resp.heartbeat_interval_ms() > 0) interval_ms_ = resp.heartbeat_interval_ms();
  registered_ = true;
  return absl::OkStatus();
}

absl::Status SchedulerLink::Beat() {
  auto [usage, ids] = snapshot_();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms));
  v1::HeartbeatRequest req;
  req.set_node_id(options_.node_id);
  *req.mutable_usage() = std::move(usage);
  for (auto& id : ids) req.add_sandbox_ids(std::move(id));
  v1::HeartbeatResponse resp;
  grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    registered_ = false;  // forgotten or declared dead: register again
    return absl::NotFoundError(s.error_message());
  }
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("heartbeat: ", s.error_message()));
  if (resp.unknown_sandbox_ids_size() > 0 && on_unknown_) {
    on_unknown_(std::vector<std::string>(resp.unknown_sandbox_ids().begin(), resp.unknown_sandbox_ids().end()));
  }
  return absl::OkStatus();
}

void SchedulerLink::Step() {
  if (!registered_ && !Register().ok()) return;
  (void)Beat();  // a missed beat is retried at the next interval
}

}  // namespace flotilla::node
