// Scale units and the front door: dead-node detection, the journal across a restart,
// reconciliation with a node's own list, spill-over between units.
#include <map>

#include "flotilla/common/clock.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/scheduler_sim/simulated_node.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<PartitionUsage> Shape(uint32_t slots) {
  PartitionUsage p;
  p.capacity = {uint64_t{slots} * kGiB, 1000000, slots};
  return {p};
}

// A fleet of simulated nodes the factory hands out by id (so a reopened unit finds them).
struct Fleet {
  std::map<std::string, std::shared_ptr<SimulatedNode>> nodes;
  std::shared_ptr<SimulatedNode> Add(const std::string& id, uint32_t slots) {
    return nodes[id] = std::make_shared<SimulatedNode>(id, Shape(slots), admission::AdmissionConfig{});
  }
  NodeClientFactory Factory() {
    return [this](const std::string& id, const std::string&) -> absl::StatusOr<std::shared_ptr<NodeClient>> {
      auto it = nodes.find(id);
      if (it == nodes.end()) return absl::NotFoundError(id);
      return std::shared_ptr<NodeClient>(it->second);
    };
  }
};

FrontDoorOptions Options(uint32_t units, const std::string& state_dir = "") {
  FrontDoorOptions o;
  o.units = units;
  o.state_dir = state_dir;
  o.seed = 7;
  o.unit.replicas = 2;
  o.unit.heartbeat_interval_ms = 1000;
  o.unit.heartbeat_timeout_ms = 5000;
  o.unit.reconcile_grace_ms = 2000;
  return o;
}

v1::CreateSandboxRequest Req(const std::string& tenant) {
  v1::CreateSandboxRequest r;
  r.set_tenant(tenant);
  r.mutable_resources()->set_memory_bytes(kGiB / 2);
  r.mutable_resources()->set_cpu_quota_millicores(10);
  (*r.mutable_labels())["task"] = "t1";
  return r;
}

TEST(ScaleUnitTest, SilentNodeIsDeadItsSandboxesLostThroughWatch) {
  FakeClock clock;
  Fleet fleet;
  auto fd = *FrontDoor::Open(Options(1), clock, fleet.Factory());
  ASSERT_EQ(*fd->RegisterNode("a", "addr-a", "", fleet.Add("a", 4)->ledger().Usage()), "unit-0");
  ASSERT_EQ(*fd->RegisterNode("b", "addr-b", "", fleet.Add("b", 4)->ledger().Usage()), "unit-0");
  auto watch = fd->events().Subscribe("exp");
  std::map<std::string, std::string> where;
  for (int i = 0; i < 6; ++i) {
    auto p = fd->CreateSandbox(Req("exp"));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->state(), v1::SandboxPlacement::RUNNING);
    where[p->sandbox_id()] = p->node_id();
    auto ev = watch->Next(absl::ZeroDuration());
    ASSERT_TRUE(ev.ok());
    EXPECT_EQ(ev->kind(), v1::SandboxEvent::CREATED);
  }
  size_t on_a = fleet.nodes["a"]->ledger().size();
  ASSERT_EQ(on_a + fleet.nodes["b"]->ledger().size(), 6u);
  ASSERT_GT(on_a, 0u);

  clock.AdvanceMillis(3000);
  ASSERT_TRUE(fd->Heartbeat("a", fleet.nodes["a"]->ledger().Usage(), nullptr).ok());
  ASSERT_TRUE(fd->Heartbeat("b", fleet.nodes["b"]->ledger().Usage(), nullptr).ok());
  clock.AdvanceMillis(5000);  // a: silent exactly the timeout, not longer
  ASSERT_TRUE(fd->Heartbeat("b", fleet.nodes["b"]->ledger().Usage(), nullptr).ok());
  EXPECT_EQ(fd->CheckLiveness(), 0u);
  clock.AdvanceMillis(1);
  EXPECT_EQ(fd->CheckLiveness(), 1u);

  size_t lost = 0;
  for (;;) {
    auto ev = watch->Next(absl::ZeroDuration());
    if (!ev.ok()) {
      EXPECT_EQ(ev.status().code(), absl::StatusCode::kDeadlineExceeded);
      break;
    }
    EXPECT_EQ(ev->kind(), v1::SandboxEvent::LOST);
    EXPECT_EQ(ev->placement().lost_reason(), v1::NODE_LOST);
    EXPECT_EQ(ev->placement().node_id(), "a");
    EXPECT_EQ(ev->detail(), "node a silent for 5001 ms");
    EXPECT_EQ(where[ev->placement().sandbox_id()], "a");
    EXPECT_EQ(fd->GetSandbox(ev->placement().sandbox_id())->state(), v1::SandboxPlacement::LOST);
    ++lost;
  }
  EXPECT_EQ(lost, on_a);
  EXPECT_EQ(fd->Stats().lost, on_a);
  EXPECT_EQ(fd->Stats().live_nodes, 1u);
  // The dead node stays listed, marked as such, beside the live one.
  auto nodes = fd->ListNodes("");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].node_id(), "a");
  EXPECT_EQ((*nodes)[0].address(), "addr-a");
  EXPECT_FALSE((*nodes)[0].alive());
  EXPECT_EQ((*nodes)[1].node_id(), "b");
  EXPECT_TRUE((*nodes)[1].alive());
  EXPECT_EQ((*nodes)[1].sandboxes(), 6u - on_a);
  for (size_t r = 0; r < fd->unit(0).replica_count(); ++r) EXPECT_EQ(fd->unit(0).replica(r).node_count(), 1u);
  // The capacity left every view: new sandboxes go to b only, until b is full.
  size_t free_b = 4 - fleet.nodes["b"]->ledger().size();
  for (size_t i = 0; i < free_b; ++i) EXPECT_EQ(fd->CreateSandbox(Req("exp"))->node_id(), "b");
  EXPECT_EQ(fd->CreateSandbox(Req("exp")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(fd->Heartbeat("a", fleet.nodes["a"]->ledger().Usage(), nullptr).status().code(),
            absl::StatusCode::kNotFound);
  // A lost sandbox can still be deleted.
  for (const auto& [id, node] : where) {
    if (node == "a") {
      EXPECT_TRUE(fd->DeleteSandbox(id).ok());
    }
  }
}

TEST(ScaleUnitTest, JournalKeepsEveryAcknowledgedSandboxAcrossReopen) {
  testing::TempDir dir;
  FakeClock clock;
  Fleet fleet;
  fleet.Add("a", 50);
  fleet.Add("b", 50);
  std::vector<std::string> kept, deleted;
  {
    auto fd = *FrontDoor::Open(Options(2, dir.path().string()), clock, fleet.Factory());
    ASSERT_TRUE(fd->RegisterNode("a", "addr-a", "unit-0", fleet.nodes["a"]->ledger().Usage()).ok());
    ASSERT_TRUE(fd->RegisterNode("b", "addr-b", "unit-1", fleet.nodes["b"]->ledger().Usage()).ok());
    // Tenants whose home is unit-0 and unit-1, so both nodes get sandboxes.
    std::string tenant_of[2];
    for (int k = 0; tenant_of[0].empty() || tenant_of[1].empty(); ++k) {
      std::string t = absl::StrCat("tenant-", k);
      tenant_of[fd->UnitFor(t)] = t;
    }
    for (int i = 0; i < 20; ++i) {
      auto p = fd->CreateSandbox(Req(tenant_of[i % 2]));
      ASSERT_TRUE(p.ok()) << p.status();
      (i % 4 == 0 ? deleted : kept).push_back(p->sandbox_id());
    }
    for (const auto& id : deleted) ASSERT_TRUE(fd->DeleteSandbox(id).ok());
  }
  auto fd = FrontDoor::Open(Options(2, dir.path().string()), clock, fleet.Factory());
  ASSERT_TRUE(fd.ok()) << fd.status();
  for (const auto& id : kept) {
    auto p = (*fd)->GetSandbox(id);
    ASSERT_TRUE(p.ok()) << id << ": " << p.status();
    EXPECT_EQ(p->state(), v1::SandboxPlacement::RUNNING);
    EXPECT_EQ(p->labels().at("task"), "t1");
  }
  for (const auto& id : deleted) EXPECT_EQ((*fd)->GetSandbox(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*fd)->ListSandboxes({}).size(), kept.size());

  // Reconciliation with the node's own list: one sandbox vanished, one stray appeared.
  auto& a = *fleet.nodes["a"];
  std::vector<std::string> on_a = a.ledger().SandboxIds();
  ASSERT_FALSE(on_a.empty());
  ASSERT_TRUE(a.ledger().Release(on_a[0]).ok());
  ASSERT_TRUE(a.ledger().Admit("sbx-stray", 0, {kGiB, 10, 1})->admitted);
  auto watch = (*fd)->events().Subscribe("");
  std::vector<std::string> ids = a.ledger().SandboxIds();
  auto unknown = (*fd)->Heartbeat("a", a.ledger().Usage(), &ids);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(*unknown, std::vector<std::string>{"sbx-stray"});
  auto lost = (*fd)->GetSandbox(on_a[0]);
  EXPECT_EQ(lost->state(), v1::SandboxPlacement::LOST);
  EXPECT_EQ(lost->lost_reason(), v1::SANDBOX_DIED);
  auto ev = watch->Next(absl::ZeroDuration());
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->kind(), v1::SandboxEvent::LOST);
  EXPECT_EQ(ev->placement().sandbox_id(), on_a[0]);
  // Node b never reports again: past the timeout its restored sandboxes are lost too.
  clock.AdvanceMillis(6000);
  ids = a.ledger().SandboxIds();
  ASSERT_TRUE((*fd)->Heartbeat("a", a.ledger().Usage(), &ids).ok());
  EXPECT_EQ((*fd)->CheckLiveness(), 1u);
  for (const auto& p : (*fd)->ListSandboxes({})) {
    EXPECT_EQ(p.state(), p.node_id() == "b" || p.sandbox_id() == on_a[0] ? v1::SandboxPlacement::LOST
                                                                          : v1::SandboxPlacement::RUNNING);
  }
}

TEST(FrontDoorTest, RoutesByTenantAndSpillsOverWhenFull) {
  FakeClock clock;
  Fleet fleet;
  FrontDoorOptions o = Options(2);
  o.spill_over_fill = 1.0;  // spill only when the home unit is completely full
  auto fd = *FrontDoor::Open(o, clock, fleet.Factory());
  ASSERT_TRUE(fd->RegisterNode("a", "addr-a", "unit-0", fleet.Add("a", 3)->ledger().Usage()).ok());
  ASSERT_TRUE(fd->RegisterNode("b", "addr-b", "unit-1", fleet.Add("b", 3)->ledger().Usage()).ok());
  // Idle nodes are listed by unit before anything is placed.
  auto idle = fd->ListNodes("unit-1");
  ASSERT_TRUE(idle.ok()) << idle.status();
  ASSERT_EQ(idle->size(), 1u);
  EXPECT_EQ((*idle)[0].node_id(), "b");
  EXPECT_EQ((*idle)[0].scale_unit(), "unit-1");
  EXPECT_TRUE((*idle)[0].alive());
  EXPECT_EQ((*idle)[0].sandboxes(), 0u);
  auto all = fd->ListNodes("");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(fd->ListNodes("unit-9").status().code(), absl::StatusCode::kNotFound);
  const std::string tenant = "exp-x";
  const std::string home = absl::StrCat("unit-", fd->UnitFor(tenant));
  const std::string other = home == "unit-0" ? "unit-1" : "unit-0";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), home);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), other);
  auto full = fd->CreateSandbox(Req(tenant));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);

  v1::ListSandboxesRequest by_node;
  by_node.set_node_id("a");
  EXPECT_EQ(fd->ListSandboxes(by_node).size(), 3u);
  v1::ListSandboxesRequest by_label;
  (*by_label.mutable_label_selector())["task"] = "t2";
  EXPECT_EQ(fd->ListSandboxes(by_label).size(), 0u);
  auto placed = fd->ListNodes("");
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->size(), 2u);
  EXPECT_EQ((*placed)[0].sandboxes(), 3u);
  EXPECT_EQ((*placed)[1].sandboxes(), 3u);
  EXPECT_EQ(fd->DeleteSandbox("sbx-none").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fd->RegisterNode("c", "addr-c", "unit-9", fleet.Add("c", 3)->ledger().Usage()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrontDoorTest, FillingHomeUnitSendsNewSandboxesToTheLeastFilled) {
  FakeClock clock;
  Fleet fleet;
  FrontDoorOptions o = Options(2);
  o.spill_over_fill = 0.5;
  auto fd = *FrontDoor::Open(o, clock, fleet.Factory());
  ASSERT_TRUE(fd->RegisterNode("a", "addr-a", "unit-0", fleet.Add("a", 4)->ledger().Usage()).ok());
  ASSERT_TRUE(fd->RegisterNode("b", "addr-b", "unit-1", fleet.Add("b", 4)->ledger().Usage()).ok());
  const std::string tenant = "exp-y";
  const std::string home = absl::StrCat("unit-", fd->UnitFor(tenant));
  const std::string other = home == "unit-0" ? "unit-1" : "unit-0";
  EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), home);
  EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), home);  // 2 of 4: not past one half
  EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), home);
  EXPECT_EQ(fd->CreateSandbox(Req(tenant))->scale_unit(), other);  // home is 3/4 full
}

}  // namespace
}  // namespace flotilla::scheduler
