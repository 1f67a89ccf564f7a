// The scheduler and three node-agent processes, each agent on its own "host": its own network
// namespace and address, reached over a veth pair. Places sandboxes across them over gRPC,
// SIGKILLs one agent, and checks that its sandboxes are reported LOST (NODE_LOST) through
// Watch within the heartbeat timeout while the other two keep placing.
#include <unistd.h>

#include <map>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "child_process.h"
#include "flotilla/common/clock.h"
#include "flotilla/scheduler/grpc_node_client.h"
#include "flotilla/scheduler/scheduler_service.h"
#include "gtest/gtest.h"
#include "netns_hosts.h"
#include "testing/temp_dir.h"
#include "testing/daemon_process.h"

namespace flotilla::scheduler {
namespace {

using testing::ChildProcess;
using testing::NetnsHosts;

using flotilla::testing::WaitFor;

TEST(SchedulerMultiHostTest, KilledAgentsSandboxesAreLostWithinTheTimeoutOthersKeepWorking) {
  if (geteuid() != 0 || std::system("ip netns list >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root and iproute2 to make network namespaces";
  }
  NetnsHosts hosts(3);
  ASSERT_TRUE(hosts.ok()) << "could not set up network namespaces and veth pairs";
  flotilla::testing::TempDir dir;

  constexpr int64_t kIntervalMs = 100, kTimeoutMs = 1000;
  SchedulerServerOptions so;
  so.listen = "0.0.0.0:0";
  so.front.units = 1;
  so.front.unit.replicas = 4;
  so.front.unit.heartbeat_interval_ms = kIntervalMs;
  so.front.unit.heartbeat_timeout_ms = kTimeoutMs;
  so.front.unit.engine.fit = FitPolicy::kSpread;
  so.front.state_dir = dir.file("state");
  auto server = SchedulerServer::Start(so, SystemClock::Get(), GrpcNodeClientFactory());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  const char* bin = std::getenv("FLOTILLA_BINARY_DIR");
  const std::string agent = absl::StrCat(bin != nullptr ? bin : ".", "/tests/scheduler/scheduler_test_node_agent");
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int k = 0; k < 3; ++k) {
    const auto& h = hosts.host(k);
    agents.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/ip", "netns", "exec", h.ns, agent, "--listen", h.address + ":0",
                                 "--scheduler", absl::StrCat(h.gateway, ":", port), "--node-id",
                                 absl::StrCat("host-", k), "--slots", "60", "--interval-ms",
                                 absl::StrCat(kIntervalMs)},
        dir.file(absl::StrCat("agent-", k, ".log"))));
  }
  ASSERT_TRUE(WaitFor([&] { return (*server)->front().Stats().live_nodes == 3; }, 20))
      << agents[0]->Log() << agents[1]->Log() << agents[2]->Log();

  auto stub = v1::Scheduler::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  // Watch from before the first placement.
  grpc::ClientContext watch_ctx;
  v1::SchedulerWatchRequest wreq;
  wreq.set_tenant("exp");
  auto reader = stub->Watch(&watch_ctx, wreq);
  reader->WaitForInitialMetadata();  // the server sends it once subscribed
  std::mutex mu;
  std::vector<std::pair<v1::SchedulerEvent, int64_t>> events;
  std::thread watcher([&] {
    v1::SchedulerEvent ev;
    while (reader->Read(&ev)) {
      std::lock_guard<std::mutex> g(mu);
      events.emplace_back(ev, SystemClock::Get().NowMillis());
    }
  });

  std::map<std::string, std::vector<std::string>> by_node;
  for (int i = 0; i < 30; ++i) {
    grpc::ClientContext ctx;
    v1::CreateSandboxRequest req;
    req.set_tenant("exp");
    req.mutable_resources()->set_memory_bytes(16ull << 20);
    req.mutable_resources()->set_cpu_quota_millicores(5);
    v1::CreateSandboxResponse resp;
    grpc::Status s = stub->CreateSandbox(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const auto& p = resp.placement();
    int k = p.node_id().back() - '0';
    EXPECT_TRUE(absl::StartsWith(p.node_address(), hosts.host(k).address + ":")) << p.node_address();
    by_node[p.node_id()].push_back(p.sandbox_id());
  }
  ASSERT_EQ(by_node.size(), 3u);  // spread over all three hosts
  const std::vector<std::string> victims = by_node["host-0"];

  const int64_t killed_at = SystemClock::Get().NowMillis();
  agents[0]->Kill();
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> g(mu);
    size_t lost = 0;
    for (const auto& [ev, at] : events) lost += ev.kind() == v1::SandboxEvent::LOST;
    return lost == victims.size();
  }, 10));
  {
    std::lock_guard<std::mutex> g(mu);
    for (const auto& [ev, at] : events) {
      if (ev.kind() != v1::SandboxEvent::LOST) continue;
      EXPECT_EQ(ev.placement().node_id(), "host-0");
      EXPECT_EQ(ev.placement().lost_reason(), v1::NODE_LOST);
      EXPECT_NE(std::find(victims.begin(), victims.end(), ev.placement().sandbox_id()), victims.end());
      // Declared dead after kTimeoutMs of silence, found by a ticker running every interval/2.
      EXPECT_LE(at - killed_at, kTimeoutMs + kIntervalMs + 500) << "lost reported late";
    }
  }
  for (const std::string node : {"host-1", "host-2"}) {
    for (const std::string& id : by_node[node]) {
      grpc::ClientContext ctx;
      v1::GetSandboxRequest req;
      req.set_sandbox_id(id);
      v1::SandboxPlacement got;
      ASSERT_TRUE(stub->GetSandbox(&ctx, req, &got).ok());
      EXPECT_EQ(got.state(), v1::SandboxPlacement::RUNNING);
    }
  }
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    v1::CreateSandboxRequest req;
    req.set_tenant("exp");
    req.mutable_resources()->set_memory_bytes(16ull << 20);
    req.mutable_resources()->set_cpu_quota_millicores(5);
    v1::CreateSandboxResponse resp;
    grpc::Status s = stub->CreateSandbox(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_NE(resp.placement().node_id(), "host-0");
  }
  EXPECT_EQ((*server)->front().Stats().live_nodes, 2u);
  watch_ctx.TryCancel();
  watcher.join();
  agents.clear();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace flotilla::scheduler
