// The Scheduler gRPC service (scheduler.proto) over a FrontDoor, and SchedulerServer: the
// service on a listening port plus the liveness ticker that declares silent nodes dead.
//
// SchedulerService is thread-safe; it does not own the FrontDoor. SchedulerServer owns its
// FrontDoor, gRPC server and ticker thread; Shutdown() (or destruction) stops them.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/notification.h"
#include "flotilla/proto/scheduler.grpc.pb.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/common/metrics_server.h"

namespace flotilla::scheduler {

class SchedulerService final : public v1::Scheduler::Service {
 public:
  explicit SchedulerService(FrontDoor* front) : front_(front) {}

  grpc::Status CreateSandbox(grpc::ServerContext*, const v1::CreateSandboxRequest*, v1::CreateSandboxResponse*) override;
  grpc::Status DeleteSandbox(grpc::ServerContext*, const v1::DeleteSandboxRequest*, v1::DeleteSandboxResponse*) override;
  grpc::Status GetSandbox(grpc::ServerContext*, const v1::GetSandboxRequest*, v1::SandboxPlacement*) override;
  grpc::Status ListSandboxes(grpc::ServerContext*, const v1::ListSandboxesRequest*, v1::ListSandboxesResponse*) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*, v1::ListNodesResponse*) override;
  grpc::Status Watch(grpc::ServerContext*, const v1::SchedulerWatchRequest*,
                     grpc::ServerWriter<v1::SchedulerEvent>*) override;
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest*, v1::RegisterNodeResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;

 private:
  FrontDoor* const front_;
};

struct SchedulerServerOptions {
  std::string listen = "127.0.0.1:0";
  // Where /metrics (Prometheus text format) is served, "host:port" (port 0: any); empty: off.
  std::string metrics_listen;
  FrontDoorOptions front;
};

class SchedulerServer {
 public:
  // Opens the front door (restoring from the journals), binds and starts serving.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(const SchedulerServerOptions& options,
                                                                const Clock& clock, NodeClientFactory factory);
  ~SchedulerServer();
  SchedulerServer(const SchedulerServer&) = delete;
  SchedulerServer& operator=(const SchedulerServer&) = delete;

  void Shutdown();
  void Wait();
  [[nodiscard]] int port() const { return port_; }
  // The bound /metrics port; 0 when metrics are off.
  [[nodiscard]] int metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }
  [[nodiscard]] FrontDoor& front() { return *front_; }

 private:
  SchedulerServer() = default;

  std::unique_ptr<FrontDoor> front_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;  // renders from front_: declared after it, destroyed before
  int port_ = 0;
  absl::Notification stop_;
  std::thread ticker_;
  std::atomic<bool> shut_{false};
};

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace flotilla::scheduler
