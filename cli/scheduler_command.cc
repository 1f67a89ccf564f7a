// `flotilla scheduler`: the scheduler daemon (front door, scale units, placement replicas,
// journals) serving the Scheduler gRPC API until SIGINT/SIGTERM.
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "commands.h"
#include "daemon_metrics.h"
#include "flotilla/admission/admission_limits.h"
#include "flotilla/common/config.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/scheduler/grpc_node_client.h"
#include "flotilla/scheduler/scheduler_service.h"

namespace flotilla::cli {
namespace {

struct SchedulerFlags {
  std::string listen = "127.0.0.1:7400";
  std::string state_dir = "var/scheduler";
  uint32_t units = 1;
  uint32_t replicas = 4;
  std::string heartbeat_interval = "1s";
  std::string heartbeat_timeout = "5s";
  std::string fit = "spread";
  double memory_warning = 0.90;
  double memory_overcommit = 1.0;
  double cpu_warning = 0.95;
  double slots_warning = 1.0;
  std::string default_memory = "1G";
  uint32_t default_cpu_millicores = 1000;
  uint32_t max_attempts = 5;
  std::string port_file;
  std::string metrics_listen;
  std::string metrics_port_file;
};

int Run(const SchedulerFlags& f) {
  scheduler::SchedulerServerOptions o;
  o.listen = f.listen;
  o.metrics_listen = f.metrics_listen;
  o.front.units = f.units;
  o.front.state_dir = f.state_dir;
  o.front.unit.replicas = f.replicas;
  auto interval = ParseDurationMs(f.heartbeat_interval);
  if (!interval.ok()) return std::cerr << "--heartbeat-interval: " << interval.status().message() << "\n", 2;
  auto timeout = ParseDurationMs(f.heartbeat_timeout);
  if (!timeout.ok()) return std::cerr << "--heartbeat-timeout: " << timeout.status().message() << "\n", 2;
  o.front.unit.heartbeat_interval_ms = *interval;
  o.front.unit.heartbeat_timeout_ms = *timeout;
  o.front.unit.reconcile_grace_ms = 2 * *interval;
  if (f.fit != "spread" && f.fit != "best-fit") {
    std::cerr << "--fit: expected 'spread' or 'best-fit', got '" << f.fit << "'\n";
    return 2;
  }
  o.front.unit.engine.fit = f.fit == "spread" ? scheduler::FitPolicy::kSpread : scheduler::FitPolicy::kBestFit;
  o.front.unit.engine.max_attempts = f.max_attempts;
  o.front.unit.engine.retry_backoff_us = 200;
  o.front.unit.engine.admission.memory_warning = f.memory_warning;
  o.front.unit.engine.admission.memory_overcommit = f.memory_overcommit;
  o.front.unit.engine.admission.cpu_warning = f.cpu_warning;
  o.front.unit.engine.admission.slots_warning = f.slots_warning;
  auto default_memory = ParseBytes(f.default_memory);
  if (!default_memory.ok()) return std::cerr << "--default-memory: " << default_memory.status().message() << "\n", 2;
  o.front.unit.engine.admission.default_memory_bytes = *default_memory;
  o.front.unit.engine.admission.default_cpu_millicores = f.default_cpu_millicores;
  if (absl::Status s = admission::AdmissionLimits::Validate(o.front.unit.engine.admission); !s.ok()) {
    std::cerr << "admission: " << s.message() << "\n";
    return 2;
  }
  ShutdownSignals signals;  // before any thread starts, so every thread inherits the mask
  auto server = scheduler::SchedulerServer::Start(o, SystemClock::Get(), scheduler::GrpcNodeClientFactory());
  if (!server.ok()) {
    std::cerr << "flotilla scheduler: " << server.status().message() << "\n";
    return 1;
  }
  FLOG(info, "scheduler serving", {{"port", (*server)->port()}, {"units", f.units}, {"state_dir", f.state_dir}});
  std::cout << "listening on port " << (*server)->port() << std::endl;
  if ((*server)->metrics_port() != 0) std::cout << "metrics on port " << (*server)->metrics_port() << std::endl;
  // The metrics port first: a reader of the gRPC port file may scrape at once.
  if (!f.metrics_port_file.empty()) WritePortFile(f.metrics_port_file, (*server)->metrics_port());
  if (!f.port_file.empty()) WritePortFile(f.port_file, (*server)->port());
  const int sig = signals.Wait();
  FLOG(info, "scheduler stopping", {{"signal", sig}});
  (*server)->Shutdown();
  return 0;
}

}  // namespace

void AddSchedulerCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SchedulerFlags>();
  CLI::App* sub = app.add_subcommand("scheduler", "Run the scheduler daemon");
  sub->add_option("--listen", f->listen, "gRPC listen address (port 0: any)")->capture_default_str();
  sub->add_option("--state-dir", f->state_dir, "directory for the scale units' journals")->capture_default_str();
  sub->add_option("--units", f->units, "scale units")->capture_default_str();
  sub->add_option("--replicas", f->replicas, "placement-engine replicas per unit")->capture_default_str();
  sub->add_option("--heartbeat-interval", f->heartbeat_interval, "interval nodes are asked to report at")->capture_default_str();
  sub->add_option("--heartbeat-timeout", f->heartbeat_timeout, "silence after which a node is dead")->capture_default_str();
  sub->add_option("--fit", f->fit, "spread or best-fit")->capture_default_str();
  sub->add_option("--memory-warning", f->memory_warning, "node memory warning threshold")->capture_default_str();
  sub->add_option("--memory-overcommit", f->memory_overcommit, "memory overcommit factor")->capture_default_str();
  sub->add_option("--cpu-warning", f->cpu_warning, "node CPU warning threshold")->capture_default_str();
  sub->add_option("--slots-warning", f->slots_warning, "node slot warning threshold")->capture_default_str();
  sub->add_option("--default-memory", f->default_memory, "memory charged when a request leaves it 0 (as the nodes do)")
      ->capture_default_str();
  sub->add_option("--default-cpu-millicores", f->default_cpu_millicores, "CPU charged when a request leaves it 0")
      ->capture_default_str();
  sub->add_option("--max-attempts", f->max_attempts, "node calls per placement")->capture_default_str();
  sub->add_option("--port-file", f->port_file, "write the bound port here once serving");
  sub->add_option("--metrics-listen", f->metrics_listen,
                  "serve Prometheus /metrics on this host:port (port 0: any; empty: off), e.g. 127.0.0.1:7401");
  sub->add_option("--metrics-port-file", f->metrics_port_file, "write the bound metrics port here once serving");
  sub->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace flotilla::cli
