#include "flotilla/scheduler/node_reporter.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "flotilla/common/logging.h"

namespace flotilla::scheduler {

NodeReporter::NodeReporter(const NodeReporterOptions& options, SnapshotFn snapshot, UnknownFn on_unknown)
    : options_(options),
      snapshot_(std::move(snapshot)),
      on_unknown_(std::move(on_unknown)),
      stub_(v1::Scheduler::NewStub(grpc::CreateChannel(options.scheduler_address, grpc::InsecureChannelCredentials()))) {
  if (options_.interval_ms > 0) interval_ms_ = options_.interval_ms;
  thread_ = std::thread([this] { Loop(); });
}

NodeReporter::~NodeReporter() { Stop(); }

void NodeReporter::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool NodeReporter::Register() {
  auto [usage, ids] = snapshot_();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms));
  v1::RegisterNodeRequest req;
  req.set_node_id(options_.node_id);
  req.set_address(options_.node_address);
  req.set_scale_unit(options_.scale_unit);
  *req.mutable_usage() = ToProto(usage);
  v1::RegisterNodeResponse resp;
  grpc::Status s = stub_->RegisterNode(&ctx, req, &resp);
  if (!s.ok()) {
    FLOG(debug, "register with scheduler failed", {{"node", options_.node_id}, {"error", s.error_message()}});
    return false;
  }
  if (options_.interval_ms == 0 && resp.heartbeat_interval_ms() > 0) interval_ms_ = resp.heartbeat_interval_ms();
  FLOG(info, "registered with scheduler", {{"node", options_.node_id}, {"unit", resp.scale_unit()}});
  return true;
}

bool NodeReporter::Beat() {
  auto [usage, ids] = snapshot_();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms));
  v1::HeartbeatRequest req;
  req.set_node_id(options_.node_id);
  *req.mutable_usage() = ToProto(usage);
  for (auto& id : ids) req.add_sandbox_ids(std::move(id));
  v1::HeartbeatResponse resp;
  grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    registered_.store(false);  // forgotten or declared dead: register again
    return false;
  }
  if (!s.ok()) return false;
  if (resp.unknown_sandbox_ids_size() > 0 && on_unknown_) {
    on_unknown_(std::vector<std::string>(resp.unknown_sandbox_ids().begin(), resp.unknown_sandbox_ids().end()));
  }
  return true;
}

void NodeReporter::Loop() {
  do {
    if (!registered_.load()) {
      if (Register()) registered_.store(true);
    }
    if (registered_.load()) Beat();
  } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(interval_ms_)));
}

}  // namespace flotilla::scheduler
