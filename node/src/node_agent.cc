// NodeAgent: flotilla.v1.NodeAgent over a Runtime, with admission and usage accounting.
#include "flotilla/node/node_agent.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "create_request.h"
#include "node_metrics.h"

namespace flotilla::node {

using admission::AdmissionCheck;
using sandbox::ExecOptions;
using sandbox::ExecutionClass;
using sandbox::OutputStream;
using sandbox::ResourceLimits;
using sandbox::Runtime;
using sandbox::SandboxEvent;
using sandbox::SandboxInfo;
using sandbox::SandboxOptions;

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

v1::Resources ToProto(const ResourceLimits& r) {
  v1::Resources p;
  p.set_memory_bytes(r.memory_bytes);
  p.set_pids(r.pids);
  p.set_cpu_weight(r.cpu_weight);
  p.set_cpu_quota_millicores(r.cpu_quota_millicores);
  p.set_disk_bytes(r.disk_bytes);
  p.set_timeout_ms(r.timeout_ms);
  return p;
}

v1::ExecutionClass ToProto(ExecutionClass c) {
  return c == ExecutionClass::kLatencySensitive ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT;
}

v1::SandboxEvent ToProto(const SandboxEvent& e, const std::string& node_id) {
  v1::SandboxEvent p;
  p.set_sandbox_id(e.sandbox_id);
  p.set_kind(static_cast<v1::SandboxEvent::Kind>(e.kind));
  p.set_reason(static_cast<v1::StopReason>(e.reason));
  p.set_detail(e.detail);
  p.set_unix_ms(e.unix_ms);
  p.set_node_id(node_id);
  return p;
}

class NodeAgentImpl final : public NodeAgent, public v1::NodeAgent::Service {
 public:
  NodeAgentImpl(std::unique_ptr<Runtime> rt, NodeAgentOptions o, AdmissionCheck check, v1::NodeUsage capacity)
      : rt_(std::move(rt)), options_(std::move(o)), check_(check), usage_(std::move(capacity)) {
    if (options_.metrics == nullptr) return;
    metrics_ = std::make_unique<NodeMetrics>(*options_.metrics);
    crashes_ = rt_->WatchEvents("", [m = metrics_.get()](const SandboxEvent& e) {
      if (e.kind == SandboxEvent::Kind::kCrashed) m->Crashed(sandbox::StopReasonName(e.reason));
    });
    collector_ = options_.metrics->AddCollector([this](MetricsSnapshotWriter& w) {
      std::map<std::pair<std::string, std::string>, int> live;  // (class, state) -> sandboxes
      for (v1::ExecutionClass c : {v1::LATENCY_SENSITIVE, v1::BEST_EFFORT}) {
        for (const char* state : {"running", "starting"}) live[{ClassLabel(c), state}] = 0;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [id, admit] : admitted_) {
          ++live[{ClassLabel(admit.execution_class()), starting_.count(id) != 0 ? "starting" : "running"}];
        }
      }
      for (const auto& [key, n] : live) {
        w.Gauge("flotilla_node_sandboxes", "Sandboxes on the node now, by execution class and state",
                {{"class", key.first}, {"state", key.second}}, n);
      }
      // Where the runtime's create, destroy, start and warm-pool reset time goes.
      const sandbox::RuntimeTimings t = rt_->Timings();
      for (const auto& [name, phase] : std::vector<std::pair<const char*, sandbox::PhaseTiming>>{
               {"create_warm", t.create_warm}, {"create_waited", t.create_waited}, {"create_cold", t.create_cold},
               {"destroy", t.destroy}, {"reset_queued", t.reset_queued}, {"reset_exit", t.reset_exit},
               {"reset_start", t.reset_start},
               {"pool_grow", t.pool_grow}, {"start_layer", t.start_layer}, {"start_spawn", t.start_spawn},
               {"start_setup", t.start_setup}}) {
        w.Counter("flotilla_node_sandbox_phase_seconds_total", "Runtime time per phase of sandbox creates, "
                  "destroys, starts and warm-pool resets", {{"phase", name}}, phase.ms / 1000.0);
        w.Counter("flotilla_node_sandbox_phase_runs_total", "Runs of each runtime phase", {{"phase", name}},
                  static_cast<double>(phase.count));
      }
    });
  }
  ~NodeAgentImpl() override {
    collector_ = MetricsRegistry::CollectorHandle();
    crashes_.reset();
  }

  grpc::Service* service() override { return this; }
  Runtime& runtime() override { return *rt_; }

  v1::NodeUsage Usage() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return usage_;
  }
  std::vector<std::string> SandboxIds() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> ids;
    for (const auto& [id, req] : admitted_) ids.push_back(id);
    return ids;
  }
  void SetUsageListener(std::function<void(const v1::NodeUsage&)> listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = std::move(listener);
  }

  grpc::Status Create(grpc::ServerContext*, const v1::CreateRequest* req, v1::CreateResponse* resp) override {
    // Every check that can refuse the request runs before the reservation, which must not leak.
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<SandboxOptions> options = SandboxOptionsOf(*req);
    if (!options.ok()) {
      CountFailure("invalid_request");
      return ToGrpc(options.status());
    }
    const v1::AdmitRequest admit = AdmitRequestOf(*req);
    // Reserve under the lock, create outside it, release on failure.
    std::string reservation = absl::StrCat("pending-", next_reservation_++);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (req->numa_partition() >= static_cast<uint32_t>(std::max(1, usage_.partitions_size()))) {
        CountFailure("invalid_request");
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("numa_partition: no partition ", req->numa_partition(), " on this node"));
      }
      v1::AdmitResponse d = check_.Decide(usage_, admit);
      if (!d.admitted()) {
        CountFailure("admission");
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "not admitted: " + d.reason());
      }
      usage_ = check_.Apply(usage_, admit);
      admitted_[reservation] = admit;
      starting_.insert(reservation);
      // A node of one partition gives every sandbox all of its CPUs: pinning would change
      // nothing and costs cpuset writes per create, so only a node of several pins.
      const bool pin = rt_->features().cpuset && usage_.partitions_size() > 1;
      for (const auto& p : usage_.partitions()) {
        if (p.index() == req->numa_partition() && pin) {
          options->resources.cpus = p.cpus();  // the partition's cpuset
          options->resources.mems = absl::StrCat(p.numa_node());
        }
      }
    }
    auto created = rt_->Create(*options);
    std::function<void(const v1::NodeUsage&)> listener;
    v1::NodeUsage now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto node = admitted_.extract(reservation);
      starting_.erase(reservation);
      if (created.ok()) {
        node.key() = created->id;
        admitted_.insert(std::move(node));
      } else {
        Release(admit);
      }
      listener = listener_;
      now = usage_;
    }
    if (!created.ok()) {
      CountFailure("runtime");
      return ToGrpc(created.status());
    }
    if (metrics_ != nullptr) metrics_->Created(req->execution_class(), SecondsSince(start), created->reused);
    if (listener) listener(now);
    resp->set_sandbox_id(created->id);
    for (const std::string& s : created->enforcers_active) resp->add_enforcers_active(s);
    for (const std::string& s : created->enforcers_inactive) resp->add_enforcers_inactive(s);
    resp->set_create_ms(created->create_ms);
    resp->set_started_ahead(created->started_ahead);
    return grpc::Status::OK;
  }

  grpc::Status Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecChunk>* writer) override {
    ExecOptions o;
    o.argv = {req->argv().begin(), req->argv().end()};
    o.env = {req->env().begin(), req->env().end()};
    o.cwd = req->cwd();
    o.stdin_data = req->stdin();
    o.timeout_ms = req->timeout_ms();
    o.output_limit_bytes = req->output_limit_bytes();
    auto r = rt_->Exec(req->sandbox_id(), o, [&](OutputStream s, std::string_view d) {
      v1::ExecChunk chunk;
      if (s == OutputStream::kStdout) {
        chunk.set_stdout(std::string(d));
      } else {
        chunk.set_stderr(std::string(d));
      }
      writer->Write(chunk);
    });
    if (!r.ok()) return ToGrpc(r.status());
    if (metrics_ != nullptr && r->reason != sandbox::StopReason::kNone) {
      metrics_->ExecStopped(sandbox::StopReasonName(r->reason));
    }
    v1::ExecChunk last;
    v1::ExecExit* e = last.mutable_exit();
    e->set_exit_code(r->exit_code);
    e->set_signal(r->signal);
    e->set_reason(static_cast<v1::StopReason>(r->reason));
    e->set_detail(r->detail);
    e->set_wall_ms(r->wall_ms);
    writer->Write(last);
    (void)ctx;
    return grpc::Status::OK;
  }

  grpc::Status PutFile(grpc::ServerContext*, const v1::PutFileRequest* req, v1::PutFileResponse*) override {
    return ToGrpc(rt_->PutFile(req->sandbox_id(), req->path(), req->content(), req->mode() ? req->mode() : 0644));
  }

  grpc::Status GetFile(grpc::ServerContext*, const v1::GetFileRequest* req, v1::GetFileResponse* resp) override {
    auto f = rt_->GetFile(req->sandbox_id(), req->path(), req->max_bytes());
    if (!f.ok()) return ToGrpc(f.status());
    resp->set_content(std::move(f->content));
    resp->set_mode(f->mode);
    return grpc::Status::OK;
  }

  grpc::Status Snapshot(grpc::ServerContext*, const v1::SnapshotRequest* req, v1::SnapshotResponse* resp) override {
    auto s = rt_->Snapshot(req->sandbox_id(), req->name());
    if (!s.ok()) return ToGrpc(s.status());
    resp->set_layer_id(s->layer_id);
    resp->set_bytes(s->bytes);
    return grpc::Status::OK;
  }

  grpc::Status Pause(grpc::ServerContext*, const v1::SandboxRef* req, v1::Empty*) override {
    return ToGrpc(rt_->Pause(req->sandbox_id()));
  }
  grpc::Status Resume(grpc::ServerContext*, const v1::SandboxRef* req, v1::Empty*) override {
    return ToGrpc(rt_->Resume(req->sandbox_id()));
  }

  grpc::Status Destroy(grpc::ServerContext*, const v1::SandboxRef* req, v1::Empty*) override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = rt_->Destroy(req->sandbox_id());
    if (!s.ok()) return ToGrpc(s);
    std::function<void(const v1::NodeUsage&)> listener;
    v1::NodeUsage now;
    v1::ExecutionClass klass = v1::BEST_EFFORT;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = admitted_.find(req->sandbox_id());
      if (it != admitted_.end()) {
        klass = it->second.execution_class();
        Release(it->second);
        admitted_.erase(it);
      }
      listener = listener_;
      now = usage_;
    }
    if (metrics_ != nullptr) metrics_->Destroyed(klass, SecondsSince(start));
    if (listener) listener(now);
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::SandboxEvent>* writer) override {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<SandboxEvent> queue;
    auto watch = rt_->WatchEvents(req->sandbox_id(), [&](const SandboxEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(e);
      cv.notify_all();
    });
    while (!ctx->IsCancelled()) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !queue.empty(); });
      while (!queue.empty()) {
        SandboxEvent e = std::move(queue.front());
        queue.pop_front();
        lock.unlock();
        if (!writer->Write(ToProto(e, options_.node_id))) return grpc::Status::OK;
        lock.lock();
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status List(grpc::ServerContext*, const v1::ListRequest*, v1::ListResponse* resp) override {
    for (const SandboxInfo& i : rt_->List()) {
      v1::SandboxInfo* p = resp->add_sandboxes();
      p->set_sandbox_id(i.id);
      p->mutable_labels()->insert(i.labels.begin(), i.labels.end());
      *p->mutable_resources() = ToProto(i.resources);
      p->set_execution_class(ToProto(i.execution_class));
      p->set_paused(i.paused);
      p->set_memory_used_bytes(i.memory_used_bytes);
    }
    return grpc::Status::OK;
  }

  grpc::Status Admit(grpc::ServerContext*, const v1::AdmitRequest* req, v1::AdmitResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    *resp = check_.Decide(usage_, *req);
    return grpc::Status::OK;
  }

  grpc::Status Usage(grpc::ServerContext*, const v1::Empty*, v1::NodeUsage* resp) override {
    *resp = NodeAgentImpl::Usage();
    return grpc::Status::OK;
  }

 private:
  // Takes `admit` back out of the usage (mu_ held).
  void Release(const v1::AdmitRequest& admit) { usage_ = check_.Release(usage_, admit); }
  void CountFailure(std::string_view reason) {
    if (metrics_ != nullptr) metrics_->CreateFailed(reason);
  }
  static double SecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::unique_ptr<Runtime> rt_;
  NodeAgentOptions options_;
  AdmissionCheck check_;
  mutable std::mutex mu_;
  v1::NodeUsage usage_;                               // guarded by mu_
  std::map<std::string, v1::AdmitRequest> admitted_;  // sandbox id -> what it reserved
  std::function<void(const v1::NodeUsage&)> listener_;
  std::atomic<uint64_t> next_reservation_{0};
  std::set<std::string> starting_;                    // reservations being created; guarded by mu_
  std::unique_ptr<NodeMetrics> metrics_;              // null without options_.metrics
  std::unique_ptr<sandbox::Watch> crashes_;          // counts crashes into metrics_
  MetricsRegistry::CollectorHandle collector_;        // reads admitted_; removed first
};

class NodeAgentServerImpl final : public NodeAgentServer {
 public:
  NodeAgentServerImpl(std::unique_ptr<grpc::Server> server, int port) : server_(std::move(server)), port_(port) {}
  ~NodeAgentServerImpl() override { Shutdown(); }
  int port() const override { return port_; }
  void Wait() override { server_->Wait(); }
  void Shutdown() override {
    if (!down_.exchange(true)) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::atomic<bool> down_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(std::unique_ptr<Runtime> runtime,
                                                             const NodeAgentOptions& options) {
  if (runtime == nullptr) return absl::InvalidArgumentError("runtime: null");
  ASSIGN_OR_RETURN(AdmissionCheck check, AdmissionCheck::Make(options.admission));
  ASSIGN_OR_RETURN(v1::NodeUsage capacity,
                   ReadNodeCapacity(options.sysfs_root, options.slots_capacity, options.partitions_per_node));
  return std::unique_ptr<NodeAgent>(new NodeAgentImpl(std::move(runtime), options, check, std::move(capacity)));
}

absl::StatusOr<std::unique_ptr<NodeAgentServer>> NodeAgentServer::Start(NodeAgent* agent, const std::string& listen) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(agent->service());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return absl::UnavailableError("cannot listen on '" + listen + "'");
  return std::unique_ptr<NodeAgentServer>(new NodeAgentServerImpl(std::move(server), port));
}

}  // namespace flotilla::node
