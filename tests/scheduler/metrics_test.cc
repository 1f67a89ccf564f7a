// The scheduler's /metrics endpoint: real placements through the gRPC service, then a scrape
// over loopback checked value by value.
#include <map>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/clock.h"
#include "flotilla/proto/scheduler.grpc.pb.h"
#include "flotilla/scheduler/metrics.h"
#include "flotilla/common/metrics_server.h"
#include "flotilla/scheduler/scheduler_service.h"
#include "flotilla/scheduler_sim/simulated_node.h"
#include "gtest/gtest.h"
#include "testing/http_client.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Sample lines of a text exposition: "name{labels}" -> value text.
std::map<std::string, std::string> Samples(const std::string& body) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    size_t sp = line.rfind(' ');
    out[std::string(line.substr(0, sp))] = std::string(line.substr(sp + 1));
  }
  return out;
}

TEST(SchedulerMetricsTest, ScrapeAfterRealPlacementsShowsExactFigures) {
  FakeClock clock;
  SchedulerServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.front.units = 1;
  o.front.seed = 5;
  o.front.unit.replicas = 1;  // one view: every node answer matches it, so no conflicts
  o.front.unit.heartbeat_timeout_ms = 5000;
  auto server = SchedulerServer::Start(o, clock, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->metrics_port(), 0);
  FrontDoor& front = (*server)->front();
  std::map<std::string, std::shared_ptr<SimulatedNode>> nodes;
  for (const char* id : {"a", "b"}) {
    PartitionUsage p;
    p.capacity = {16 * kGiB, 64000, 16};
    nodes[id] = std::make_shared<SimulatedNode>(id, std::vector<PartitionUsage>{p}, admission::AdmissionConfig{});
    ASSERT_TRUE(front.AddNode(0, id, nodes[id], nodes[id]->ledger().Usage()).ok());
  }

  auto stub = v1::Scheduler::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext ctx;
    v1::CreateSandboxRequest req;
    req.set_tenant("exp");
    req.mutable_resources()->set_memory_bytes(kGiB);
    req.mutable_resources()->set_cpu_quota_millicores(100);
    v1::CreateSandboxResponse resp;
    grpc::Status s = stub->CreateSandbox(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ids.push_back(resp.placement().sandbox_id());
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteSandboxRequest req;
    req.set_sandbox_id(ids[0]);
    v1::DeleteSandboxResponse resp;
    ASSERT_TRUE(stub->DeleteSandbox(&ctx, req, &resp).ok());
  }
  // Node b falls silent: it dies and its sandboxes are lost.
  const size_t on_b = nodes["b"]->ledger().size();
  clock.AdvanceMillis(3000);
  ASSERT_TRUE(front.Heartbeat("a", nodes["a"]->ledger().Usage(), nullptr).ok());
  clock.AdvanceMillis(3000);
  front.CheckLiveness();  // the server's own ticker may get there first: either way b is dead

  const auto response = flotilla::testing::HttpCall((*server)->metrics_port(), "GET", "/metrics");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.content_type.rfind("text/plain; version=0.0.4", 0), 0u) << response.content_type;
  const std::string& body = response.body;
  EXPECT_NE(body.find("# TYPE flotilla_scheduler_placement_latency_seconds histogram\n"), std::string::npos);
  std::map<std::string, std::string> m = Samples(body);
  const std::string u = "unit=\"unit-0\"";
  EXPECT_EQ(m["flotilla_scheduler_placements_total{" + u + "}"], "5");
  EXPECT_EQ(m["flotilla_scheduler_node_calls_total{" + u + "}"], "5");
  EXPECT_EQ(m["flotilla_scheduler_rejections_total{" + u + "}"], "0");
  EXPECT_EQ(m["flotilla_scheduler_conflicts_total{" + u + "}"], "0");
  EXPECT_EQ(m["flotilla_scheduler_retries_total{" + u + "}"], "0");
  // The fake clock stands still while placing: every placement took 0 s.
  EXPECT_EQ(m["flotilla_scheduler_placement_latency_seconds_bucket{" + u + ",le=\"1e-05\"}"], "5");
  EXPECT_EQ(m["flotilla_scheduler_placement_latency_seconds_bucket{" + u + ",le=\"+Inf\"}"], "5");
  EXPECT_EQ(m["flotilla_scheduler_placement_latency_seconds_count{" + u + "}"], "5");
  EXPECT_EQ(m["flotilla_scheduler_placement_latency_seconds_sum{" + u + "}"], "0");
  EXPECT_EQ(m["flotilla_scheduler_nodes{" + u + ",state=\"alive\"}"], "1");
  EXPECT_EQ(m["flotilla_scheduler_nodes{" + u + ",state=\"dead\"}"], "1");
  EXPECT_EQ(m["flotilla_scheduler_sandboxes{" + u + ",state=\"pending\"}"], "0");
  EXPECT_EQ(m["flotilla_scheduler_sandboxes{" + u + ",state=\"running\"}"], std::to_string(4 - on_b));
  EXPECT_EQ(m["flotilla_scheduler_sandboxes{" + u + ",state=\"lost\"}"], std::to_string(on_b));
  EXPECT_EQ(m["flotilla_scheduler_sandboxes_lost_total{" + u + "}"], std::to_string(on_b));

  EXPECT_EQ(flotilla::testing::HttpCall((*server)->metrics_port(), "GET", "/other").status, 404);
  EXPECT_EQ(flotilla::testing::HttpCall((*server)->metrics_port(), "POST", "/metrics").status, 405);
}

TEST(SchedulerMetricsTest, RecordsIntoTheBucketOfItsUpperBound) {
  LatencyHistogram h;
  h.Record(5'000);          // <= 10 us
  h.Record(30'000);         // <= 50 us
  h.Record(2'000'000'000);  // <= 10 s
  h.Record(20'000'000'000); // +Inf
  LatencyHistogram::Reading r = h.Read();
  EXPECT_EQ(r.count, 4u);
  EXPECT_EQ(r.sum_ns, 22'000'035'000);
  EXPECT_EQ(r.buckets[0], 1u);
  EXPECT_EQ(r.buckets[1], 0u);
  EXPECT_EQ(r.buckets[2], 1u);
  EXPECT_EQ(r.buckets[12], 1u);
  EXPECT_EQ(r.buckets[13], 1u);
}

TEST(SchedulerMetricsTest, BadAddressIsInvalidArgument) {
  auto s = MetricsServer::Start("no-port", [] { return std::string(); });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "metrics address 'no-port': expected host:port");
  auto unknown = MetricsServer::Start("no-such-host.invalid:0", [] { return std::string(); });
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
}

// A host name is resolved; the scrape answers on the address it named.
TEST(SchedulerMetricsTest, HostNamesResolve) {
  auto s = MetricsServer::Start("localhost:0", [] { return std::string("up 1\n"); });
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_GT((*s)->port(), 0);
  auto r = flotilla::testing::HttpCall((*s)->port(), "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "up 1\n");
}

}  // namespace
}  // namespace flotilla::scheduler
