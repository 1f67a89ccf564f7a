// `flotilla node`: the node agent daemon (NodeAgent gRPC service over this host's runtime),
// with Prometheus /metrics of the agent (sandboxes by state and class, create/destroy latency,
// failures, crashes, stopped commands) on --metrics-listen.
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "commands.h"
#include "daemon_metrics.h"
#include "flotilla/admission/admission_limits.h"
#include "flotilla/common/config.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/node/node_agent.h"
#include "flotilla/sandbox/zygote_main.h"

namespace flotilla::cli {
namespace {

std::atomic<bool> g_stop{false};

struct NodeFlags {
  std::string listen = "0.0.0.0:7070";
  std::string state_dir = "/var/lib/flotilla";
  std::string scheduler, node_id, advertise;
  double memory_overcommit = 1.0, memory_warning = 0.9, cpu_warning = 0.95;
  uint32_t slots = 2500, partitions_per_node = 1;
  std::string default_memory = "1G";
  uint32_t default_cpu_millicores = 1000;
  DaemonMetricsFlags metrics;
};


int RunNode(const NodeFlags& f) {
  using namespace flotilla::sandbox;
  ShutdownSignals signals;  // before the runtime's and gRPC's threads exist
  using namespace flotilla::node;
  RuntimeOptions ro;
  ro.state_dir = f.state_dir;
  // This binary has every component's libraries loaded; the small flotilla-zygote next to it
  // (or `flotilla`, where that could not be built) is the zygote that sandbox inits are
  // copies of.
  ro.zygote_binary = SiblingZygoteExecutable();
  auto rt = Runtime::Open(ro);
  if (!rt.ok()) {
    std::cerr << "flotilla node: " << rt.status() << "\n";
    return 1;
  }
  NodeAgentOptions ao;
  ao.node_id = f.node_id;
  ao.admission.memory_overcommit = f.memory_overcommit;
  ao.admission.memory_warning = f.memory_warning;
  ao.admission.cpu_warning = f.cpu_warning;
  auto default_memory = ParseBytes(f.default_memory);
  if (!default_memory.ok()) {
    std::cerr << "flotilla node: --default-memory: " << default_memory.status().message() << "\n";
    return 2;
  }
  ao.admission.default_memory_bytes = *default_memory;
  ao.admission.default_cpu_millicores = f.default_cpu_millicores;
  if (absl::Status s = admission::AdmissionLimits::Validate(ao.admission); !s.ok()) {
    std::cerr << "flotilla node: admission: " << s.message() << "\n";
    return 2;
  }
  ao.slots_capacity = f.slots;
  ao.partitions_per_node = f.partitions_per_node;
  MetricsRegistry metrics;  // before the agent: its collector is removed before this goes
  ao.metrics = &metrics;
  auto agent = NodeAgent::Create(std::move(*rt), ao);
  if (!agent.ok()) {
    std::cerr << "flotilla node: " << agent.status() << "\n";
    return 1;
  }
  auto metrics_server = ServeDaemonMetrics("flotilla node", f.metrics, metrics);
  if (!metrics_server.ok()) {
    std::cerr << "flotilla node: " << metrics_server.status().message() << "\n";
    return 2;
  }
  auto server = NodeAgentServer::Start(agent->get(), f.listen);
  if (!server.ok()) {
    std::cerr << "flotilla node: " << server.status() << "\n";
    return 1;
  }
  std::cout << "flotilla node: listening on port " << (*server)->port() << std::endl;
  std::thread link;
  if (!f.scheduler.empty()) {
    std::string advertise = f.advertise.empty() ? f.listen : f.advertise;
    // A listen address with port 0 is not reachable: advertise the port actually bound.
    if (absl::EndsWith(advertise, ":0")) {
      advertise = absl::StrCat(advertise.substr(0, advertise.size() - 1), (*server)->port());
    }
    link = std::thread([&agent, &f, advertise] {
      absl::Status s = RunSchedulerLink(**agent, f.scheduler, f.node_id, advertise, [] { return g_stop.load(); });
      if (!s.ok()) std::cerr << "flotilla node: " << s << "\n";
    });
  }
  signals.Wait();
  g_stop = true;
  (*server)->Shutdown();
  if (link.joinable()) link.join();
  return 0;
}

}  // namespace

void AddNodeCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<NodeFlags>();
  CLI::App* node = app.add_subcommand("node", "Run the node agent daemon");
  node->add_option("--listen", f->listen, "gRPC listen address (host:port; port 0 picks one)");
  node->add_option("--state-dir", f->state_dir, "Runtime state directory");
  node->add_option("--scheduler", f->scheduler, "Scheduler address to register with and send heartbeats to");
  node->add_option("--node-id", f->node_id, "This node's id (with --scheduler)");
  node->add_option("--advertise", f->advertise, "Address the scheduler reaches this agent at (default: --listen)");
  node->add_option("--memory-overcommit", f->memory_overcommit, "Memory overcommit factor for admission (>= 1)");
  node->add_option("--memory-warning", f->memory_warning, "Admission threshold of memory use (0..1]");
  node->add_option("--cpu-warning", f->cpu_warning, "Admission threshold of CPU use (0..1]");
  node->add_option("--slots", f->slots, "Sandboxes the node holds");
  node->add_option("--partitions-per-node", f->partitions_per_node, "Sub-NUMA partitions per NUMA node");
  node->add_option("--default-memory", f->default_memory,
                   "Memory charged when a request leaves it 0 (the scheduler's --default-memory must match)")
      ->capture_default_str();
  node->add_option("--default-cpu-millicores", f->default_cpu_millicores,
                   "CPU charged when a request leaves it 0 (the scheduler's flag of that name must match)")
      ->capture_default_str();
  AddDaemonMetricsFlags(node, f->metrics, "0.0.0.0:7071");
  node->callback([f, exit_code] {
    if (!f->scheduler.empty() && f->node_id.empty()) {
      std::cerr << "flotilla node: --node-id is required with --scheduler\n";
      *exit_code = 2;
      return;
    }
    *exit_code = RunNode(*f);
  });
}

}  // namespace flotilla::cli
