// A whole RL in-flight bound on one node: 512 sandboxes placed at once by the scale unit's
// placement replicas, then many destroy/create cycles, with the node's admission sized by
// admission::SizeForInFlight. Each request names its memory (64 MiB, as every sample's sandbox
// does), which is what the node and the replicas' view charge, not the sized default.
#include <thread>

#include "flotilla/admission/in_flight_sizing.h"
#include "flotilla/common/clock.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/scheduler_sim/simulated_node.h"
#include "gtest/gtest.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kHostMemory = 23ull << 30;  // a 2-core host with 23 GiB
constexpr uint32_t kInFlight = 512;
constexpr uint64_t kSampleMemory = 64 * kMiB;

admission::ResourceVector Host() { return {kHostMemory, 2000, 2500}; }

std::vector<PartitionUsage> Shape() {
  PartitionUsage p;
  p.capacity = Host();
  return {p};
}

v1::CreateSandboxRequest Sample() {
  v1::CreateSandboxRequest r;
  r.set_tenant("bench");
  r.mutable_resources()->set_memory_bytes(kSampleMemory);
  return r;
}

struct Platform {
  FakeClock clock;
  std::shared_ptr<SimulatedNode> node;
  std::unique_ptr<FrontDoor> fd;
  explicit Platform(const admission::AdmissionConfig& a) {
    node = std::make_shared<SimulatedNode>("n", Shape(), a);
    FrontDoorOptions o;
    o.units = 1;
    o.seed = 11;
    o.unit.engine.admission = a;  // the embedded platform's four replicas
    fd = *FrontDoor::Open(o, clock, [this](const std::string&, const std::string&) {
      return absl::StatusOr<std::shared_ptr<NodeClient>>(std::shared_ptr<NodeClient>(node));
    });
    EXPECT_EQ(*fd->RegisterNode("n", "addr-n", "", node->ledger().Usage()), "unit-0");
  }
  void Beat() {
    auto [usage, ids] = node->ledger().Snapshot();
    ASSERT_TRUE(fd->Heartbeat("n", usage, &ids).ok());
  }
  // `count` creates from 8 threads at once; returns the ids placed and the first refusal.
  std::vector<std::string> CreateConcurrently(uint32_t count, std::string* refusal) {
    std::vector<std::vector<std::string>> placed(8);
    std::vector<std::string> refused(8);
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (uint32_t i = t; i < count; i += 8) {
          auto p = fd->CreateSandbox(Sample());
          if (p.ok()) {
            placed[t].push_back(p->sandbox_id());
          } else if (refused[t].empty()) {
            refused[t] = std::string(p.status().message());
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    std::vector<std::string> ids;
    for (uint32_t t = 0; t < 8; ++t) {
      ids.insert(ids.end(), placed[t].begin(), placed[t].end());
      if (refusal->empty()) *refusal = refused[t];
    }
    return ids;
  }
};

TEST(InFlightTest, SizingChargesTheRequestsOwnMemory) {
  auto a = admission::SizeForInFlight(admission::AdmissionConfig{}, kInFlight, kSampleMemory, Host());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->default_cpu_millicores, 1u);             // 1900 admitted millicores / (3 x 512)
  EXPECT_EQ(a->default_memory_bytes, 6029312u);         // 23 GiB / 8 / 512
  EXPECT_DOUBLE_EQ(a->memory_overcommit, 4.64);         // 3 x 512 x 64 MiB over 0.9 x 23 GiB = 4.6377
  auto tiny = admission::SizeForInFlight(admission::AdmissionConfig{}, kInFlight, 0, {kHostMemory, 1000, 1000});
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().message(), "slots_capacity: 1000 slots at slots_warning 1 hold fewer than 3 x 512 sandboxes");
  auto no_cpu = admission::SizeForInFlight(admission::AdmissionConfig{}, kInFlight, 0, {kHostMemory, 1000, 2500});
  ASSERT_FALSE(no_cpu.ok());
  EXPECT_EQ(no_cpu.status().message(),
            "cpu_millicores: 1000 at cpu_warning 0.95 give less than 1 millicore to each of 3 x 512 sandboxes");
}

// The cause of the refusals: sized by its default charge alone, the node (and so every
// replica's view of it) holds only 331 sandboxes of 64 MiB (0.9 x 23 GiB), whatever the default.
TEST(InFlightTest, DefaultChargeAloneHoldsOnly331OfTheBound) {
  admission::AdmissionConfig a;
  a.default_cpu_millicores = 1;
  a.default_memory_bytes = 6029312;
  Platform p(a);
  std::string refusal;
  std::vector<std::string> ids = p.CreateConcurrently(kInFlight, &refusal);
  EXPECT_EQ(ids.size(), 331u);
  EXPECT_EQ(p.node->ledger().size(), 331u);
  EXPECT_NE(refusal.find("every scale unit is full"), std::string::npos) << refusal;
}

TEST(InFlightTest, WholeBoundPlacedAtOnceAndThroughManyCycles) {
  auto a = admission::SizeForInFlight(admission::AdmissionConfig{}, kInFlight, kSampleMemory, Host());
  ASSERT_TRUE(a.ok()) << a.status();
  Platform p(*a);
  p.Beat();
  // Half the bound within one heartbeat interval, the report (a trend of 256 a second), then
  // the other half most of an interval later, when the view extrapolates that trend furthest.
  std::string refusal;
  std::vector<std::string> ids = p.CreateConcurrently(kInFlight / 2, &refusal);
  p.clock.AdvanceMillis(1000);
  p.Beat();
  p.clock.AdvanceMillis(900);
  std::vector<std::string> more = p.CreateConcurrently(kInFlight / 2, &refusal);
  ids.insert(ids.end(), more.begin(), more.end());
  ASSERT_EQ(ids.size(), kInFlight) << refusal;
  EXPECT_EQ(p.node->ledger().size(), kInFlight);
  // 40 cycles: a quarter of the samples end (their sandboxes destroyed, as a warm pool's
  // return is), new ones start at once; a heartbeat every 250 ms.
  for (int cycle = 0; cycle < 40; ++cycle) {
    for (uint32_t i = 0; i < kInFlight / 4; ++i) {
      ASSERT_TRUE(p.fd->DeleteSandbox(ids.back()).ok());
      ids.pop_back();
    }
    p.clock.AdvanceMillis(50);
    std::vector<std::string> again = p.CreateConcurrently(kInFlight / 4, &refusal);
    ASSERT_EQ(again.size(), kInFlight / 4) << "cycle " << cycle << ": " << refusal;
    ids.insert(ids.begin(), again.begin(), again.end());
    p.clock.AdvanceMillis(200);
    p.Beat();
  }
  EXPECT_EQ(p.node->ledger().size(), kInFlight);
  UnitStats s = p.fd->Stats();
  EXPECT_EQ(s.running, kInFlight);
  EXPECT_EQ(s.placement.no_capacity, 0u);
  EXPECT_EQ(s.placement.rejections, 0u);
}

}  // namespace
}  // namespace flotilla::scheduler
