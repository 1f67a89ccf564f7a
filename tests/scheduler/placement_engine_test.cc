// Placement-engine replicas: scoring, node-local rejection and retries, reservations and
// trends, and replicas racing for the same capacity.
#include <cmath>
#include <thread>

#include "flotilla/common/clock.h"
#include "flotilla/scheduler/placement_engine.h"
#include "flotilla/scheduler_sim/simulated_node.h"
#include "gtest/gtest.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<PartitionUsage> Shape(uint32_t partitions, uint32_t slots_each) {
  std::vector<PartitionUsage> out;
  for (uint32_t i = 0; i < partitions; ++i) {
    PartitionUsage p;
    p.index = i;
    p.numa_node = i;
    p.capacity = {uint64_t{slots_each} * kGiB, 1000000, slots_each};
    out.push_back(p);
  }
  return out;
}

NodeUsageSnapshot Snapshot(const std::vector<PartitionUsage>& partitions) {
  NodeUsageSnapshot out;
  out.partitions.assign(partitions.begin(), partitions.end());
  return out;
}

EngineOptions Deterministic(FitPolicy fit) {
  EngineOptions o;
  o.fit = fit;
  o.tie_break = 0;
  o.partition_weight = 0;
  o.class_mix_weight = 0;
  o.admission.memory_overcommit = 1.0;
  o.admission.memory_warning = 1.0;
  return o;
}

struct Node {
  std::shared_ptr<SimulatedNode> sim;
  std::shared_ptr<NodeHandle> handle;
};

Node MakeNode(const std::string& id, uint32_t partitions, uint32_t slots, const admission::AdmissionConfig& policy) {
  Node n;
  n.sim = std::make_shared<SimulatedNode>(id, Shape(partitions, slots), policy);
  n.handle = std::make_shared<NodeHandle>();
  n.handle->id = id;
  n.handle->client = n.sim;
  return n;
}

// Fills `count` slots of partition `p` directly on the node (as another replica would).
void Fill(Node& n, uint32_t p, uint32_t count) {
  static int serial = 0;
  for (uint32_t i = 0; i < count; ++i) {
    ASSERT_TRUE(n.sim->ledger().Admit(absl::StrCat("pre-", ++serial), p, {kGiB, 10, 1})->admitted);
  }
}

PlaceRequest Request(const std::string& id, v1::ExecutionClass cls = v1::BEST_EFFORT) {
  PlaceRequest r;
  r.sandbox_id = id;
  r.request = {kGiB, 10, 1};
  r.execution_class = cls;
  return r;
}

struct FitCase {
  FitPolicy fit;
  const char* want_node;
};

TEST(PlacementEngineTest, FitPolicyPicksFullestOrEmptiest) {
  for (const FitCase& c : {FitCase{FitPolicy::kBestFit, "a"}, FitCase{FitPolicy::kSpread, "b"}}) {
    FakeClock clock;
    EngineOptions o = Deterministic(c.fit);
    Node a = MakeNode("a", 1, 10, o.admission), b = MakeNode("b", 1, 10, o.admission);
    Fill(a, 0, 8);
    Fill(b, 0, 2);
    PlacementEngine engine("r0", o, clock, 1);
    engine.AddNode(a.handle, a.sim->ledger().Usage());
    engine.AddNode(b.handle, b.sim->ledger().Usage());
    auto p = engine.Place(Request("s1"));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->node->id, c.want_node);
    EXPECT_EQ(p->attempts, 1u);
  }
}

TEST(PlacementEngineTest, LandsInThePartitionThatFits) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kSpread);
  Node a = MakeNode("a", 2, 4, o.admission);
  Fill(a, 0, 4);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  auto p = engine.Place(Request("s1"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->partition, 1u);
  EXPECT_EQ(a.sim->ledger().Usage().partitions[1].used.slots, 1u);
}

TEST(PlacementEngineTest, LatencySensitiveGoesWhereFewAre) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kSpread);
  o.fit_weight = 0;
  o.class_mix_weight = 1;
  Node a = MakeNode("a", 1, 10, o.admission), b = MakeNode("b", 1, 10, o.admission);
  a.handle->sandboxes = 4;
  a.handle->latency_sensitive = 4;
  b.handle->sandboxes = 4;
  b.handle->latency_sensitive = 0;
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  engine.AddNode(b.handle, b.sim->ledger().Usage());
  EXPECT_EQ(engine.Place(Request("ls", v1::LATENCY_SENSITIVE))->node->id, "b");
  EXPECT_EQ(engine.Place(Request("be", v1::BEST_EFFORT))->node->id, "a");
}

TEST(PlacementEngineTest, RejectionRefreshesTheViewAndRetriesElsewhere) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  Node a = MakeNode("a", 1, 10, o.admission), b = MakeNode("b", 1, 10, o.admission);
  Fill(a, 0, 5);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());  // the view: a has 5 free
  engine.AddNode(b.handle, b.sim->ledger().Usage());
  Fill(a, 0, 5);  // another replica took them
  auto p = engine.Place(Request("s1"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->node->id, "b");
  EXPECT_EQ(p->attempts, 2u);
  PlacementStats s = engine.stats();
  EXPECT_EQ(s.placements, 1u);
  EXPECT_EQ(s.attempts, 2u);
  EXPECT_EQ(s.rejections, 1u);
  EXPECT_EQ(s.conflicts, 1u);
  EXPECT_EQ(engine.PredictedUsage("a", 0)->slots, 10u);  // learned from the rejection
}

TEST(PlacementEngineTest, RetriesAreBounded) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  o.max_attempts = 1;
  Node a = MakeNode("a", 1, 10, o.admission), b = MakeNode("b", 1, 10, o.admission);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  engine.AddNode(b.handle, b.sim->ledger().Usage());
  Fill(a, 0, 10);
  Fill(b, 0, 10);
  auto p = engine.Place(Request("s1"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(p.status().message()).find("gave up after 1 attempts"), std::string::npos) << p.status();
  EXPECT_EQ(engine.stats().rejections, 1u);

  // With more attempts the second rejection leaves no room in the view at all.
  o.max_attempts = 5;
  PlacementEngine engine2("r1", o, clock, 1);
  engine2.AddNode(a.handle, Snapshot(Shape(1, 10)));
  engine2.AddNode(b.handle, Snapshot(Shape(1, 10)));
  auto q = engine2.Place(Request("s2"));
  EXPECT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine2.stats().rejections, 2u);
  EXPECT_EQ(engine2.stats().attempts, 2u);
  EXPECT_EQ(engine2.stats().no_capacity, 1u);
}

TEST(PlacementEngineTest, UnreachableNodeIsSkippedAndCounted) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  Node a = MakeNode("a", 1, 10, o.admission), b = MakeNode("b", 1, 10, o.admission);
  Fill(a, 0, 3);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  engine.AddNode(b.handle, b.sim->ledger().Usage());
  a.sim->Crash();
  auto p = engine.Place(Request("s1"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->node->id, "b");
  EXPECT_EQ(engine.stats().node_errors, 1u);
  // Still suspect: the next placement does not try it.
  ASSERT_TRUE(engine.Place(Request("s2")).ok());
  EXPECT_EQ(engine.stats().node_errors, 1u);
}

TEST(PlacementEngineTest, ReservationsDecayTowardsTheReport) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  o.reservation_decay_ms = 1000;
  Node a = MakeNode("a", 1, 10, o.admission);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  const ResourceVector req{4 * kGiB, 30, 1};
  auto choice = engine.Choose(req, v1::BEST_EFFORT);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(*engine.PredictedUsage("a", 0), req);  // in flight: fully reserved
  clock.AdvanceMillis(1000);
  ResourceVector after_tau = *engine.PredictedUsage("a", 0);
  EXPECT_NEAR(static_cast<double>(after_tau.memory_bytes), 4.0 * kGiB * std::exp(-1.0), 2.0);
  EXPECT_NEAR(static_cast<double>(after_tau.cpu_millicores), 30.0 * std::exp(-1.0), 0.5);
  clock.AdvanceMillis(4000);
  EXPECT_NEAR(static_cast<double>(engine.PredictedUsage("a", 0)->memory_bytes), 4.0 * kGiB * std::exp(-5.0), 2.0);
  // The node's answer replaces the reservation with the measured usage.
  absl::StatusOr<PlaceResult> r = a.sim->Place(PlaceRequest{"s1", 0, req, v1::BEST_EFFORT, nullptr});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(engine.Settle(*choice, req, r));
  EXPECT_EQ(*engine.PredictedUsage("a", 0), req);
}

TEST(PlacementEngineTest, TrendFromReportsIsExtrapolatedUpToTheHorizon) {
  FakeClock clock;
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  o.trend_horizon_ms = 1000;
  Node a = MakeNode("a", 1, 100, o.admission);
  PlacementEngine engine("r0", o, clock, 1);
  engine.AddNode(a.handle, a.sim->ledger().Usage());
  clock.AdvanceMillis(1000);
  Fill(a, 0, 10);
  engine.OnReport("a", a.sim->ledger().Usage());  // +10 slots per second
  EXPECT_EQ(engine.PredictedUsage("a", 0)->slots, 10u);
  clock.AdvanceMillis(500);
  EXPECT_EQ(engine.PredictedUsage("a", 0)->slots, 15u);
  clock.AdvanceMillis(5000);
  EXPECT_EQ(engine.PredictedUsage("a", 0)->slots, 20u);
  engine.RemoveNode("a");
  EXPECT_EQ(engine.PredictedUsage("a", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.node_count(), 0u);
}

TEST(PlacementEngineTest, RacingReplicasNeverOvercommitANode) {
  SystemClock& clock = SystemClock::Get();
  EngineOptions o = Deterministic(FitPolicy::kBestFit);
  o.tie_break = 0.05;
  o.max_attempts = 3;
  Node a = MakeNode("a", 2, 50, o.admission), b = MakeNode("b", 1, 50, o.admission);
  std::vector<std::unique_ptr<PlacementEngine>> replicas;
  for (int i = 0; i < 4; ++i) {
    replicas.push_back(std::make_unique<PlacementEngine>(absl::StrCat("r", i), o, clock, 100 + i));
    replicas.back()->AddNode(a.handle, a.sim->ledger().Usage());
    replicas.back()->AddNode(b.handle, b.sim->ledger().Usage());
  }
  std::atomic<int> placed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        if (replicas[t]->Place(Request(absl::StrCat("s", t, "-", i))).ok()) ++placed;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(placed.load(), 150);
  EXPECT_EQ(a.sim->ledger().size() + b.sim->ledger().size(), 150u);
  uint64_t placements = 0, rejections = 0, attempts = 0;
  for (auto& r : replicas) {
    placements += r->stats().placements;
    rejections += r->stats().rejections;
    attempts += r->stats().attempts;
  }
  EXPECT_EQ(placements, 150u);
  EXPECT_EQ(attempts, placements + rejections);
}

}  // namespace
}  // namespace flotilla::scheduler
