#include "flotilla/scheduler/scheduler_service.h"

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/scheduler/metrics.h"

namespace flotilla::scheduler {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::Status SchedulerService::CreateSandbox(grpc::ServerContext*, const v1::CreateSandboxRequest* req,
                                             v1::CreateSandboxResponse* resp) {
  if (req->execution_class() != v1::EXECUTION_CLASS_UNSPECIFIED && !v1::ExecutionClass_IsValid(req->execution_class())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "execution_class: unknown value");
  }
  uint32_t attempts = 0;
  absl::StatusOr<v1::SandboxPlacement> p = front_->CreateSandbox(*req, &attempts);
  if (!p.ok()) return ToGrpc(p.status());
  *resp->mutable_placement() = *std::move(p);
  resp->set_attempts(attempts);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::DeleteSandbox(grpc::ServerContext*, const v1::DeleteSandboxRequest* req,
                                             v1::DeleteSandboxResponse*) {
  if (req->sandbox_id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sandbox_id: empty");
  return ToGrpc(front_->DeleteSandbox(req->sandbox_id()));
}

grpc::Status SchedulerService::GetSandbox(grpc::ServerContext*, const v1::GetSandboxRequest* req,
                                          v1::SandboxPlacement* resp) {
  if (req->sandbox_id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sandbox_id: empty");
  absl::StatusOr<v1::SandboxPlacement> p = front_->GetSandbox(req->sandbox_id());
  if (!p.ok()) return ToGrpc(p.status());
  *resp = *std::move(p);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ListSandboxes(grpc::ServerContext*, const v1::ListSandboxesRequest* req,
                                             v1::ListSandboxesResponse* resp) {
  for (auto& p : front_->ListSandboxes(*req)) *resp->add_sandboxes() = std::move(p);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* req,
                                         v1::ListNodesResponse* resp) {
  absl::StatusOr<std::vector<v1::NodeInfo>> nodes = front_->ListNodes(req->scale_unit());
  if (!nodes.ok()) return ToGrpc(nodes.status());
  for (auto& n : *nodes) *resp->add_nodes() = std::move(n);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Watch(grpc::ServerContext* ctx, const v1::SchedulerWatchRequest* req,
                                     grpc::ServerWriter<v1::SchedulerEvent>* writer) {
  std::unique_ptr<Subscription> sub = front_->events().Subscribe(req->tenant());
  // Headers go out at once so the caller knows the subscription is live.
  writer->SendInitialMetadata();
  while (!ctx->IsCancelled()) {
    absl::StatusOr<v1::SchedulerEvent> ev = sub->Next(absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(ev.status())) continue;
    if (!ev.ok()) return ToGrpc(ev.status());
    if (!writer->Write(*ev)) break;
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* req,
                                            v1::RegisterNodeResponse* resp) {
  absl::StatusOr<std::string> unit =
      front_->RegisterNode(req->node_id(), req->address(), req->scale_unit(), FromProto(req->usage()));
  if (!unit.ok()) return ToGrpc(unit.status());
  resp->set_scale_unit(*unit);
  resp->set_heartbeat_interval_ms(static_cast<uint32_t>(front_->options().unit.heartbeat_interval_ms));
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                                         v1::HeartbeatResponse* resp) {
  std::vector<std::string> ids(req->sandbox_ids().begin(), req->sandbox_ids().end());
  absl::StatusOr<std::vector<std::string>> unknown = front_->Heartbeat(req->node_id(), FromProto(req->usage()), &ids);
  if (!unknown.ok()) return ToGrpc(unknown.status());
  for (auto& id : *unknown) resp->add_unknown_sandbox_ids(std::move(id));
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(const SchedulerServerOptions& options,
                                                                        const Clock& clock, NodeClientFactory factory) {
  std::unique_ptr<SchedulerServer> s(new SchedulerServer());
  absl::StatusOr<std::unique_ptr<FrontDoor>> front = FrontDoor::Open(options.front, clock, std::move(factory));
  if (!front.ok()) return front.status();
  s->front_ = *std::move(front);
  s->service_ = std::make_unique<SchedulerService>(s->front_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("listen: cannot bind '", options.listen, "'"));
  }
  if (!options.metrics_listen.empty()) {
    FrontDoor* front_door = s->front_.get();
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(options.metrics_listen, [front_door] { return RenderPrometheus(*front_door); });
    if (!metrics.ok()) return metrics.status();
    s->metrics_ = *std::move(metrics);
  }
  int64_t tick_ms = std::max<int64_t>(10, options.front.unit.heartbeat_interval_ms / 2);
  SchedulerServer* self = s.get();
  s->ticker_ = std::thread([self, tick_ms] {
    while (!self->stop_.WaitForNotificationWithTimeout(absl::Milliseconds(tick_ms))) self->front_->CheckLiveness();
  });
  return s;
}

void SchedulerServer::Shutdown() {
  if (shut_.exchange(true)) return;
  stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
  front_->events().Close();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics_.reset();
}

void SchedulerServer::Wait() { server_->Wait(); }

SchedulerServer::~SchedulerServer() {
  if (server_ != nullptr) Shutdown();
}

}  // namespace flotilla::scheduler
