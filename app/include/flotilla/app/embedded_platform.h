// EmbeddedPlatform: the one place that wires the embedded default, every service in one
// process over the same gRPC and HTTP APIs the distributed deployment uses:
//
//   scheduler     the Scheduler gRPC service (front door, one scale unit) on a loopback port
//   node agent    the NodeAgent gRPC service over this host's sandbox runtime, registered with
//                 the scheduler and heartbeating like a `flotilla node` on another host
//   engine        the inference engine, and its Engine gRPC service when engine_listen is set
//   worker HTTP   the OpenAI/Anthropic wire APIs over the served model (with http_address)
//   trainer bridge  the RL experiment's TrainerBridge gRPC service (with an experiment)
//
// and the one trajectory store every sample goes to. `flotilla up`, `run` and `eval` start
// it with different options; the daemons (`flotilla scheduler`, `node`, `worker`) are the same
// pieces one per process. With `scheduler_address` set, the platform starts no scheduler and
// no node of its own: every sandbox is placed by that `flotilla scheduler` on its `flotilla
// node` agents, through the same front-door client the embedded default uses.
//
// Thread-safety: the accessors are thread-safe once Start returned; Stop() (or destruction)
// stops everything in reverse order. Owns everything it starts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/app/embedded_node.h"
#include "flotilla/app/embedded_worker.h"
#include "flotilla/inference/engine_service.h"
#include "flotilla/scheduler/scheduler_service.h"
#include "flotilla/trainer_bridge/experiment.h"
#include "flotilla/worker/sandbox_client.h"

namespace grpc {
class Server;
}

namespace flotilla::app {

struct PlatformOptions {
  // The engine, the served model, the trajectory store and the wire APIs.
  EmbeddedWorkerOptions worker;
  // An external scheduler (host:port of `flotilla scheduler`) to place sandboxes through;
  // empty: the platform runs the scheduler and one node agent itself (the fields below).
  std::string scheduler_address;
  // Where the scheduler and the node agent listen (host:port; port 0 picks one).
  std::string scheduler_listen = "127.0.0.1:0";
  std::string node_listen = "127.0.0.1:0";
  // The Engine gRPC service; empty: not served (the engine is used in-process only).
  std::string engine_listen;
  // The node's runtime state; empty: <worker.state_dir>/sandboxes.
  std::string sandbox_state_dir;
  // Where the node finds image layers (built environments); empty: under its state.
  std::string image_dir;
  // Removes what an earlier process with the same sandbox state left (a killed run's mounts).
  bool cleanup_leftovers = true;
  // Admission of the node and the scheduler's prediction of it (one config for both). A
  // sandbox that asks for nothing is charged a tenth of a core and 256 MiB: one machine runs
  // many mostly idle sandboxes (a charge of a whole core would admit one per core).
  admission::AdmissionConfig admission = {.default_memory_bytes = 256ull << 20, .default_cpu_millicores = 100};
  // Every service records its Prometheus figures in metrics() (the default); false: none
  // records any, and the worker's /metrics, when served, answers 404 (how `flotilla bench rollout
  // --metrics-overhead` measures what observability costs against a platform without it).
  bool metrics = true;
  // An RL experiment to run on the engine (its TrainerBridge, rollout controller, verifier).
  const trainer_bridge::ExperimentConfig* experiment = nullptr;
  trainer_bridge::ExperimentOptions experiment_options;
};

// The embedded default for an RL experiment, as `flotilla run` and `flotilla bridge serve` start
// it: the state (trajectory store, sandbox runtime) under the experiment's state_dir, no served
// model (the policy is the trainer's to publish), an engine batch of at least the in-flight
// bound, and the experiment's trainer bridge. A sample's sandbox idles while the model writes
// (a prompt task's tests are one shell script): one that asks for no CPU quota is charged a
// fiftieth of a core, so that the whole in-flight bound is admitted on a small machine (the
// charge limits nothing at run time). `experiment` is borrowed and must outlive the platform.
PlatformOptions ExperimentPlatformOptions(const trainer_bridge::ExperimentConfig& experiment);

// One started service, for `up` to print.
struct ServiceEndpoint {
  std::string name;
  std::string address;
};

class EmbeddedPlatform {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedPlatform>> Start(const PlatformOptions& options);
  ~EmbeddedPlatform();
  EmbeddedPlatform(const EmbeddedPlatform&) = delete;
  EmbeddedPlatform& operator=(const EmbeddedPlatform&) = delete;

  // Every service started, in start order.
  [[nodiscard]] std::vector<ServiceEndpoint> Services() const;

  EmbeddedWorker& worker() { return *worker_; }
  // The platform's own node and scheduler; null with an external scheduler.
  EmbeddedNode* node() { return node_.get(); }
  scheduler::SchedulerServer* scheduler() { return scheduler_.get(); }
  // host:port of the scheduler every sandbox is placed through (the platform's or the external one).
  const std::string& scheduler_address() const { return scheduler_address_; }
  // Sandboxes placed by the scheduler and reached through the NodeAgent API (eval's
  // scaffolds, the verifier).
  worker::SandboxClient& sandboxes() { return *sandboxes_; }
  // Null without an experiment, and after Stop().
  trainer_bridge::Experiment* experiment() { return experiment_.get(); }
  // Every service's Prometheus figures (served at the worker's /metrics).
  MetricsRegistry& metrics() { return metrics_; }

  // Stops and destroys the experiment, then stops the other services (in reverse start order).
  void Stop();

 private:
  EmbeddedPlatform() = default;

  MetricsRegistry metrics_;  // first: every service's collectors are removed before it goes
  std::unique_ptr<scheduler::SchedulerServer> scheduler_;
  MetricsRegistry::CollectorHandle scheduler_metrics_;  // reads scheduler_: removed before it goes
  std::unique_ptr<EmbeddedNode> node_;
  std::unique_ptr<worker::SandboxClient> sandboxes_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_stub_;  // what the dashboard asks for its fleet view
  std::unique_ptr<EmbeddedWorker> worker_;
  std::unique_ptr<inference::EngineService> engine_service_;
  std::unique_ptr<grpc::Server> engine_server_;
  std::string engine_address_;
  std::string scheduler_address_;
  std::unique_ptr<trainer_bridge::Experiment> experiment_;
  bool stopped_ = false;
};

}  // namespace flotilla::app
