#include "flotilla/app/embedded_platform.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/scheduler/grpc_node_client.h"
#include "flotilla/scheduler/metrics.h"

namespace flotilla::app {
namespace {

std::string HostOf(const std::string& listen) { return listen.substr(0, listen.rfind(':')); }

const char* PlacementStateName(v1::SandboxPlacement::State s) {
  switch (s) {
    case v1::SandboxPlacement::PENDING: return "starting";
    case v1::SandboxPlacement::RUNNING: return "running";
    case v1::SandboxPlacement::DELETED: return "stopped";
    case v1::SandboxPlacement::LOST: return "crashed";
    default: return "unknown";
  }
}

const char* ClassName(v1::ExecutionClass c) {
  return c == v1::LATENCY_SENSITIVE ? "latency-sensitive" : "best-effort";
}

// The dashboard's fleet: every node the scheduler knows by scale unit, idle ones too, with
// the sandboxes placed there, each with its state and execution class (asked over the
// Scheduler API, the platform's own scheduler or an external one alike).
absl::StatusOr<std::vector<dashboard::FleetUnit>> FleetOf(v1::Scheduler::Stub& scheduler) {
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  v1::ListNodesResponse nodes;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::Status st = scheduler.ListNodes(&ctx, v1::ListNodesRequest(), &nodes);
    if (!st.ok()) return absl::UnavailableError(absl::StrCat("fleet: the scheduler's ListNodes: ", st.error_message()));
  }
  v1::ListSandboxesResponse boxes;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::Status st = scheduler.ListSandboxes(&ctx, v1::ListSandboxesRequest(), &boxes);
    if (!st.ok()) {
      return absl::UnavailableError(absl::StrCat("fleet: the scheduler's ListSandboxes: ", st.error_message()));
    }
  }
  // unit -> node -> the node's entry; a sandbox on a node missing from the first answer (it
  // joined between the two calls) still gets one.
  std::map<std::string, std::map<std::string, dashboard::FleetNode>> tree;
  for (const v1::NodeInfo& n : nodes.nodes()) {
    tree[n.scale_unit()][n.node_id()] = {n.node_id(), n.alive(), n.slots_capacity(), {}};
  }
  for (const v1::SandboxPlacement& p : boxes.sandboxes()) {
    dashboard::FleetNode& node = tree[p.scale_unit()][p.node_id()];
    node.id = p.node_id();
    node.sandboxes.push_back({p.sandbox_id(), PlacementStateName(p.state()), ClassName(p.execution_class())});
  }
  std::vector<dashboard::FleetUnit> units;
  for (auto& [unit, by_id] : tree) {
    dashboard::FleetUnit u{unit, {}};
    for (auto& [id, node] : by_id) u.nodes.push_back(std::move(node));
    units.push_back(std::move(u));
  }
  return units;
}

}  // namespace

PlatformOptions ExperimentPlatformOptions(const trainer_bridge::ExperimentConfig& experiment) {
  PlatformOptions po;
  po.worker.state_dir = experiment.state_dir;
  po.worker.serve_model = false;
  po.worker.engine.max_batch = std::max<uint32_t>(64, experiment.rollout.max_in_flight);
  po.sandbox_state_dir = (std::filesystem::path(experiment.state_dir) / "sandbox").string();
  po.admission.default_cpu_millicores = 20;
  po.experiment = &experiment;
  return po;
}

absl::StatusOr<std::unique_ptr<EmbeddedPlatform>> EmbeddedPlatform::Start(const PlatformOptions& o) {
  std::unique_ptr<EmbeddedPlatform> p(new EmbeddedPlatform());
  std::error_code ec;
  std::filesystem::create_directories(o.worker.state_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("state_dir '", o.worker.state_dir, "': ", ec.message()));
  const std::string state = std::filesystem::absolute(o.worker.state_dir, ec).lexically_normal().string();

  if (o.scheduler_address.empty()) {
    // The scheduler first, so the node can register with it.
    scheduler::SchedulerServerOptions so;
    so.listen = o.scheduler_listen;
    so.front.state_dir = "";  // the embedded default keeps no placement journal
    so.front.unit.engine.admission = o.admission;
    ASSIGN_OR_RETURN(p->scheduler_, scheduler::SchedulerServer::Start(so, SystemClock::Get(),
                                                                       scheduler::GrpcNodeClientFactory()));
    p->scheduler_address_ = absl::StrCat(HostOf(o.scheduler_listen), ":", p->scheduler_->port());
    if (o.metrics) p->scheduler_metrics_ = scheduler::AddSchedulerCollector(p->metrics_, p->scheduler_->front());

    EmbeddedNodeOptions no;
    no.state_dir = o.sandbox_state_dir.empty() ? state + "/sandboxes" : o.sandbox_state_dir;
    no.image_dir = o.image_dir;
    no.cleanup_leftovers = o.cleanup_leftovers;
    no.listen = o.node_listen;
    no.scheduler_address = p->scheduler_address_;
    no.admission = o.admission;
    no.metrics = o.metrics ? &p->metrics_ : nullptr;
    ASSIGN_OR_RETURN(p->node_, EmbeddedNode::Start(no));
  } else {
    // An external `flotilla scheduler` and its `flotilla node` agents serve their own /metrics.
    p->scheduler_address_ = o.scheduler_address;
  }
  // Every sandbox the platform's users ask for comes from the scheduler's front door.
  auto scheduler_channel = grpc::CreateChannel(p->scheduler_address_, grpc::InsecureChannelCredentials());
  if (!o.scheduler_address.empty() &&
      !scheduler_channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    return absl::UnavailableError(absl::StrCat("scheduler '", o.scheduler_address, "': not reachable within 10 s"));
  }
  p->sandboxes_ = worker::SandboxClient::ThroughScheduler(
      scheduler_channel, o.experiment != nullptr ? o.experiment->name : "embedded");
  p->scheduler_stub_ = v1::Scheduler::NewStub(scheduler_channel);

  // Every service's figures go to the platform's one registry, served at the worker's /metrics
  // with the dashboard.
  EmbeddedWorkerOptions wo = o.worker;
  wo.engine.metrics = o.metrics ? &p->metrics_ : nullptr;
  wo.dashboard.metrics = o.metrics ? &p->metrics_ : nullptr;
  wo.dashboard.fleet = [stub = p->scheduler_stub_.get()]() { return FleetOf(*stub); };
  if (o.experiment != nullptr && wo.dashboard.metrics_log_path.empty()) {
    wo.dashboard.metrics_log_path = (std::filesystem::path(o.experiment->state_dir) / "metrics.jsonl").string();
  }
  ASSIGN_OR_RETURN(p->worker_, EmbeddedWorker::Start(wo));

  if (!o.engine_listen.empty()) {
    p->engine_service_ = std::make_unique<inference::EngineService>(&p->worker_->engine(), o.worker.engine.backend);
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(o.engine_listen, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(p->engine_service_.get());
    p->engine_server_ = builder.BuildAndStart();
    if (p->engine_server_ == nullptr || port == 0) {
      return absl::UnavailableError(absl::StrCat("engine_listen: cannot listen on '", o.engine_listen, "'"));
    }
    p->engine_address_ = absl::StrCat(HostOf(o.engine_listen), ":", port);
  }

  if (o.experiment != nullptr) {
    trainer_bridge::ExperimentOptions xo = o.experiment_options;
    xo.store = &p->worker_->store();
    xo.metrics = o.metrics ? &p->metrics_ : nullptr;
    ASSIGN_OR_RETURN(p->experiment_,
                     trainer_bridge::Experiment::Start(*o.experiment, p->worker_->engine(), p->sandboxes_.get(), xo));
  }
  FLOG(info, "embedded platform started",
       {{"scheduler", p->scheduler_address_}, {"node", p->node_ ? p->node_->address() : "external"}});
  return p;
}

std::vector<ServiceEndpoint> EmbeddedPlatform::Services() const {
  std::vector<ServiceEndpoint> out;
  if (scheduler_ != nullptr) {
    out.push_back({"scheduler", absl::StrCat("127.0.0.1:", scheduler_->port())});
    out.push_back({"node agent", node_->address().empty() ? "in-process" : node_->address()});
  } else {
    out.push_back({"scheduler (external)", scheduler_address_});
  }
  out.push_back({"engine", engine_address_.empty() ? "in-process" : engine_address_});
  if (!worker_->http_address().empty()) out.push_back({"worker HTTP", worker_->http_address()});
  if (experiment_ != nullptr) out.push_back({"trainer bridge", experiment_->address()});
  return out;
}

void EmbeddedPlatform::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // The experiment goes first and whole: its verifier destroys its sandbox through the
  // scheduler and the node, which must still be serving (a call on the node's in-process
  // channel after its server is gone crashes inside gRPC).
  if (experiment_) experiment_->Stop();
  experiment_.reset();
  if (engine_server_) engine_server_->Shutdown();
  if (worker_) worker_->Stop();
  if (node_) node_->Stop();
  scheduler_metrics_ = MetricsRegistry::CollectorHandle();
  if (scheduler_) scheduler_->Shutdown();
}

EmbeddedPlatform::~EmbeddedPlatform() {
  Stop();
  experiment_.reset();
  engine_server_.reset();
  engine_service_.reset();
  worker_.reset();
  sandboxes_.reset();
  scheduler_stub_.reset();
  node_.reset();
  scheduler_.reset();
}

}  // namespace flotilla::app
