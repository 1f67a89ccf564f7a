// scheduler_test_node_agent: a node agent process for the scheduler's multi-process tests.
// Serves LedgerNodeAgent on --listen, registers with --scheduler and heartbeats through
// NodeReporter (the agent side of the protocol), destroys sandboxes the scheduler does not
// know, and runs until killed.
//
//   scheduler_test_node_agent --listen 10.0.0.2:0 --scheduler 10.0.0.1:7400 --node-id n1 --slots 100
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/scheduler_sim/node_reporter.h"
#include "flotilla/scheduler/numa.h"
#include "ledger_node_agent.h"

int main(int argc, char** argv) {
  using namespace flotilla::scheduler;
  flotilla::InitLogging();
  std::string listen = "127.0.0.1:0", sched, node_id, host;
  uint32_t slots = 100;
  int64_t interval_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--listen") listen = v;
    else if (k == "--scheduler") sched = v;
    else if (k == "--node-id") node_id = v;
    else if (k == "--slots" && !absl::SimpleAtoi(v, &slots)) return std::cerr << "--slots: not a number\n", 2;
    else if (k == "--interval-ms" && !absl::SimpleAtoi(v, &interval_ms)) return std::cerr << "--interval-ms: not a number\n", 2;
  }
  if (sched.empty() || node_id.empty()) return std::cerr << "need --scheduler and --node-id\n", 2;
  host = listen.substr(0, listen.rfind(':'));

  // The node's real NUMA layout, with `slots` worker slots cut across its domains.
  auto domains = ReadNumaTopology("/sys");
  if (!domains.ok()) return std::cerr << domains.status() << "\n", 1;
  NodeLedger ledger(CutPartitions(*domains, slots), flotilla::admission::AdmissionConfig{});
  testing::LedgerNodeAgent service(&ledger);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return std::cerr << "cannot listen on " << listen << "\n", 1;

  NodeReporterOptions ro;
  ro.scheduler_address = sched;
  ro.node_id = node_id;
  ro.node_address = absl::StrCat(host, ":", port);
  ro.interval_ms = interval_ms;
  NodeReporter reporter(
      ro, [&ledger] { return ledger.Snapshot(); },
      [&ledger](const std::vector<std::string>& unknown) {
        for (const auto& id : unknown) (void)ledger.Release(id);
      });
  std::cout << "node " << node_id << " serving on " << ro.node_address << std::endl;
  server->Wait();
  return 0;
}
