// `flotilla scheduler` as its own process with two node-agent processes on loopback: place
// sandboxes over gRPC, kill -9 the scheduler while a client is creating sandboxes, restart it
// on the same address and state directory, and check that no acknowledged sandbox is lost
// and the nodes' lists converge with the scheduler's.
#include <filesystem>
#include <map>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "child_process.h"
#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/proto/scheduler.grpc.pb.h"
#include "gtest/gtest.h"
#include "testing/http_client.h"
#include "testing/temp_dir.h"
#include "testing/daemon_process.h"

namespace flotilla::scheduler {
namespace {

using testing::ChildProcess;

std::string BinaryDir() {
  const char* d = std::getenv("FLOTILLA_BINARY_DIR");
  return d != nullptr ? d : ".";
}

using flotilla::testing::WaitFor;

int ReadPort(const std::string& path) {
  std::ifstream in(path);
  int port = 0;
  in >> port;
  return port;
}

std::unique_ptr<ChildProcess> StartScheduler(const flotilla::testing::TempDir& dir, const std::string& listen) {
  std::filesystem::remove(dir.file("port"));
  std::filesystem::remove(dir.file("metrics-port"));
  return std::make_unique<ChildProcess>(
      std::vector<std::string>{BinaryDir() + "/cli/flotilla", "scheduler", "--listen", listen, "--state-dir",
                               dir.file("state"), "--port-file", dir.file("port"), "--units", "2",
                               "--heartbeat-interval", "100ms", "--heartbeat-timeout", "3s", "--metrics-listen",
                               "127.0.0.1:0", "--metrics-port-file", dir.file("metrics-port")},
      dir.file("scheduler.log"));
}

struct Client {
  std::unique_ptr<v1::Scheduler::Stub> stub;
  explicit Client(int port)
      : stub(v1::Scheduler::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                        grpc::InsecureChannelCredentials()))) {}
  grpc::Status Create(const std::string& tenant, v1::CreateSandboxResponse* resp, const std::string& request_id = "") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::CreateSandboxRequest req;
    req.set_tenant(tenant);
    req.set_request_id(request_id);
    req.mutable_resources()->set_memory_bytes(16ull << 20);
    req.mutable_resources()->set_cpu_quota_millicores(5);
    return stub->CreateSandbox(&ctx, req, resp);
  }
  grpc::Status Get(const std::string& id, v1::SandboxPlacement* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GetSandboxRequest req;
    req.set_sandbox_id(id);
    return stub->GetSandbox(&ctx, req, out);
  }
  std::vector<v1::SandboxPlacement> List(const std::string& node) {
    grpc::ClientContext ctx;
    v1::ListSandboxesRequest req;
    req.set_node_id(node);
    v1::ListSandboxesResponse resp;
    if (!stub->ListSandboxes(&ctx, req, &resp).ok()) return {};
    return {resp.sandboxes().begin(), resp.sandboxes().end()};
  }
};

std::set<std::string> NodeList(const std::string& address) {
  auto stub = v1::NodeAgent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::ListResponse resp;
  std::set<std::string> ids;
  if (!stub->List(&ctx, v1::ListRequest(), &resp).ok()) return ids;
  for (const auto& s : resp.sandboxes()) ids.insert(s.sandbox_id());
  return ids;
}

TEST(SchedulerRestartTest, KillNineMidRunLosesNoAcknowledgedSandbox) {
  flotilla::testing::TempDir dir;
  auto sched = StartScheduler(dir, "127.0.0.1:0");
  ASSERT_TRUE(WaitFor([&] { return ReadPort(dir.file("port")) > 0; }, 20)) << sched->Log();
  const int port = ReadPort(dir.file("port"));
  const std::string sched_addr = absl::StrCat("127.0.0.1:", port);
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int k = 0; k < 2; ++k) {
    agents.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BinaryDir() + "/tests/scheduler/scheduler_test_node_agent", "--listen",
                                 "127.0.0.1:0", "--scheduler", sched_addr, "--node-id", absl::StrCat("node-", k),
                                 "--slots", "400"},
        dir.file(absl::StrCat("agent-", k, ".log"))));
  }
  Client client(port);
  v1::CreateSandboxResponse first;
  ASSERT_TRUE(WaitFor([&] { return client.Create("exp-0", &first).ok(); }, 20)) << sched->Log();

  std::mutex mu;
  std::vector<v1::SandboxPlacement> acked{first.placement()};
  // Sandboxes the creator asked for with a request id: id -> (tenant, acknowledged placement).
  std::map<std::string, std::pair<std::string, std::string>> by_request;
  // Both agents registered: spread puts the next sandbox on the emptier node.
  ASSERT_TRUE(WaitFor([&] {
    v1::CreateSandboxResponse resp;
    if (!client.Create("exp-0", &resp).ok()) return false;
    acked.push_back(resp.placement());
    return resp.placement().node_id() != first.placement().node_id();
  }, 30)) << agents[0]->Log() << agents[1]->Log();
  std::atomic<bool> stop{false};
  std::thread creator([&] {
    Client c(port);
    for (int i = 0; !stop.load(); ++i) {
      v1::CreateSandboxResponse resp;
      const std::string tenant = absl::StrCat("exp-", i % 5), request_id = absl::StrCat("req-", i);
      if (c.Create(tenant, &resp, request_id).ok()) {
        std::lock_guard<std::mutex> g(mu);
        acked.push_back(resp.placement());
        by_request[request_id] = {tenant, resp.placement().sandbox_id()};
      }
    }
  });
  // Counted on the creator's own acknowledgements: on a loaded machine the loop above may
  // already have placed many while the second agent was registering.
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> g(mu);
    return by_request.size() >= 150;
  }, 60));
  sched->Kill();  // SIGKILL while the creator has calls in flight
  stop.store(true);
  creator.join();

  sched = StartScheduler(dir, sched_addr);
  ASSERT_TRUE(WaitFor([&] { return ReadPort(dir.file("port")) == port; }, 20)) << sched->Log();
  Client after(port);
  std::set<std::string> nodes_seen;
  for (const auto& p : acked) {
    v1::SandboxPlacement got;
    grpc::Status s = after.Get(p.sandbox_id(), &got);
    ASSERT_TRUE(s.ok()) << p.sandbox_id() << ": " << s.error_message();
    EXPECT_EQ(got.state(), v1::SandboxPlacement::RUNNING) << p.sandbox_id();
    EXPECT_EQ(got.node_id(), p.node_id());
    EXPECT_EQ(got.node_address(), p.node_address());
    nodes_seen.insert(p.node_address());
  }
  EXPECT_EQ(nodes_seen.size(), 2u);
  // Each node's own list converges on the scheduler's: sandboxes created but never
  // acknowledged (the kill landed between the node's Create and the journal) are destroyed.
  for (const std::string& address : nodes_seen) {
    std::string node_id;
    for (const auto& p : acked) {
      if (p.node_address() == address) node_id = p.node_id();
    }
    bool converged = WaitFor([&] {
      std::set<std::string> want;
      for (const auto& p : after.List(node_id)) {
        if (p.state() == v1::SandboxPlacement::RUNNING) want.insert(p.sandbox_id());
      }
      return want == NodeList(address);
    }, 10);
    EXPECT_TRUE(converged) << node_id;
  }
  for (const auto& p : after.List("")) EXPECT_NE(p.state(), v1::SandboxPlacement::LOST) << p.sandbox_id();
  // A client retrying an acknowledged request after the restart gets the same sandbox back.
  ASSERT_GE(by_request.size(), 100u);
  const size_t listed = after.List("").size();
  for (const auto& [request_id, want] : by_request) {
    v1::CreateSandboxResponse again;
    grpc::Status s = after.Create(want.first, &again, request_id);
    ASSERT_TRUE(s.ok()) << request_id << ": " << s.error_message();
    EXPECT_EQ(again.placement().sandbox_id(), want.second) << request_id;
  }
  EXPECT_EQ(after.List("").size(), listed);
  // The restarted daemon serves /metrics with the restored units' figures.
  ASSERT_TRUE(WaitFor([&] { return ReadPort(dir.file("metrics-port")) > 0; }, 5));
  const auto scrape = flotilla::testing::HttpCall(ReadPort(dir.file("metrics-port")), "GET", "/metrics");
  EXPECT_EQ(scrape.status, 200) << scrape.body;
  EXPECT_NE(scrape.body.find("flotilla_scheduler_nodes{unit=\"unit-0\",state=\"alive\"}"), std::string::npos);
  v1::CreateSandboxResponse more;
  // Restored nodes rejoin the placement views at their first heartbeat after the restart.
  EXPECT_TRUE(WaitFor([&] { return after.Create("exp-9", &more).ok(); }, 10));
}

}  // namespace
}  // namespace flotilla::scheduler
