// Client request ids on CreateSandbox: a retry gets the same sandbox, across a restart of
// the scheduler too; reusing an id for a different request is refused with a clear message.
#include <map>

#include "absl/strings/str_cat.h"
#include "flotilla/common/clock.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/scheduler_sim/simulated_node.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

FrontDoorOptions Options(const std::string& state_dir) {
  FrontDoorOptions o;
  o.units = 2;
  o.state_dir = state_dir;
  o.seed = 11;
  o.unit.replicas = 2;
  return o;
}

struct Fleet {
  std::map<std::string, std::shared_ptr<SimulatedNode>> nodes;
  std::shared_ptr<SimulatedNode> Add(const std::string& id, uint32_t slots) {
    PartitionUsage p;
    p.capacity = {uint64_t{slots} * kGiB, 1000000, slots};
    return nodes[id] = std::make_shared<SimulatedNode>(id, std::vector<PartitionUsage>{p}, admission::AdmissionConfig{});
  }
  NodeClientFactory Factory() {
    return [this](const std::string& id, const std::string&) -> absl::StatusOr<std::shared_ptr<NodeClient>> {
      auto it = nodes.find(id);
      if (it == nodes.end()) return absl::NotFoundError(id);
      return std::shared_ptr<NodeClient>(it->second);
    };
  }
  // Node "a" with `slots` slots, registered in `unit` of a fresh front door without a journal.
  std::unique_ptr<FrontDoor> FrontDoorOverNodeA(const Clock& clock, uint32_t slots, const std::string& unit) {
    Add("a", slots);
    auto fd = *FrontDoor::Open(Options(""), clock, Factory());
    EXPECT_TRUE(fd->RegisterNode("a", "addr-a", unit, nodes["a"]->ledger().Usage()).ok());
    return fd;
  }
  size_t Total() const {
    size_t n = 0;
    for (const auto& [id, node] : nodes) n += node->ledger().size();
    return n;
  }
};

v1::CreateSandboxRequest Req(const std::string& request_id, uint64_t memory = kGiB / 2) {
  v1::CreateSandboxRequest r;
  r.set_tenant("exp-1");
  r.set_request_id(request_id);
  r.mutable_resources()->set_memory_bytes(memory);
  r.mutable_resources()->set_cpu_quota_millicores(10);
  (*r.mutable_labels())["task"] = "t1";
  (*r.mutable_labels())["sample"] = "3";
  return r;
}

TEST(RequestIdTest, FingerprintIgnoresTheIdAndLabelOrderButNotParameters) {
  v1::CreateSandboxRequest a = Req("r-1");
  v1::CreateSandboxRequest b = Req("r-2");
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(b));
  v1::CreateSandboxRequest c = Req("r-1");
  c.mutable_labels()->clear();
  (*c.mutable_labels())["sample"] = "3";
  (*c.mutable_labels())["task"] = "t1";
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(c));
  EXPECT_NE(RequestFingerprint(a), RequestFingerprint(Req("r-1", kGiB)));
  v1::CreateSandboxRequest d = Req("r-1");
  d.set_image("other");
  EXPECT_NE(RequestFingerprint(a), RequestFingerprint(d));
}

TEST(RequestIdTest, RetryReturnsTheSameSandboxAndPlacesNothingNew) {
  FakeClock clock;
  Fleet fleet;
  auto fd = fleet.FrontDoorOverNodeA(clock, 8, "unit-0");
  absl::StatusOr<v1::SandboxPlacement> first = fd->CreateSandbox(Req("r-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::SandboxPlacement> again = fd->CreateSandbox(Req("r-1"));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->sandbox_id(), first->sandbox_id());
    EXPECT_EQ(again->node_id(), "a");
    EXPECT_EQ(again->state(), v1::SandboxPlacement::RUNNING);
  }
  EXPECT_EQ(fleet.Total(), 1u);
  EXPECT_EQ(fd->Stats().placement.placements, 1u);
  // No id, or another id: new sandboxes.
  v1::CreateSandboxRequest anonymous = Req("");
  ASSERT_TRUE(fd->CreateSandbox(anonymous).ok());
  ASSERT_TRUE(fd->CreateSandbox(anonymous).ok());
  ASSERT_TRUE(fd->CreateSandbox(Req("r-2")).ok());
  EXPECT_EQ(fleet.Total(), 4u);
}

TEST(RequestIdTest, ReusingTheIdForADifferentRequestIsAlreadyExists) {
  FakeClock clock;
  Fleet fleet;
  auto fd = fleet.FrontDoorOverNodeA(clock, 8, "unit-1");
  absl::StatusOr<v1::SandboxPlacement> first = fd->CreateSandbox(Req("r-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::SandboxPlacement> other = fd->CreateSandbox(Req("r-1", kGiB));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(other.status().message(),
            absl::StrCat("request_id 'r-1': already used by a different request (sandbox ", first->sandbox_id(),
                         "); a retry must repeat the original request unchanged, a new request needs a new id"));
  EXPECT_EQ(fleet.Total(), 1u);
}

TEST(RequestIdTest, RetryAfterDeleteIsFailedPreconditionAndPlacesNothing) {
  FakeClock clock;
  Fleet fleet;
  auto fd = fleet.FrontDoorOverNodeA(clock, 8, "unit-0");
  absl::StatusOr<v1::SandboxPlacement> first = fd->CreateSandbox(Req("r-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(fd->DeleteSandbox(first->sandbox_id()).ok());
  absl::StatusOr<v1::SandboxPlacement> late = fd->CreateSandbox(Req("r-1"));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.status().message(),
            absl::StrCat("request_id 'r-1': its sandbox ", first->sandbox_id(), " was already deleted"));
  EXPECT_EQ(fleet.Total(), 0u);
}

TEST(RequestIdTest, FailedPlacementFreesTheIdForARetry) {
  FakeClock clock;
  Fleet fleet;
  auto fd = fleet.FrontDoorOverNodeA(clock, 1, "unit-0");
  ASSERT_TRUE(fd->CreateSandbox(Req("fill")).ok());
  EXPECT_EQ(fd->CreateSandbox(Req("r-1")).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(fd->DeleteSandbox(fd->ListSandboxes({})[0].sandbox_id()).ok());
  ASSERT_TRUE(fd->Heartbeat("a", fleet.nodes["a"]->ledger().Usage(), nullptr).ok());  // the slot is free again
  absl::StatusOr<v1::SandboxPlacement> retry = fd->CreateSandbox(Req("r-1"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(fleet.Total(), 1u);
}

TEST(RequestIdTest, IdsSurviveARestartThroughTheJournal) {
  testing::TempDir dir;
  FakeClock clock;
  Fleet fleet;
  fleet.Add("a", 8);
  fleet.Add("b", 8);
  std::string kept_id, deleted_id;
  {
    auto fd = *FrontDoor::Open(Options(dir.path().string()), clock, fleet.Factory());
    ASSERT_TRUE(fd->RegisterNode("a", "addr-a", "unit-0", fleet.nodes["a"]->ledger().Usage()).ok());
    ASSERT_TRUE(fd->RegisterNode("b", "addr-b", "unit-1", fleet.nodes["b"]->ledger().Usage()).ok());
    absl::StatusOr<v1::SandboxPlacement> kept = fd->CreateSandbox(Req("r-kept"));
    ASSERT_TRUE(kept.ok()) << kept.status();
    kept_id = kept->sandbox_id();
    absl::StatusOr<v1::SandboxPlacement> deleted = fd->CreateSandbox(Req("r-deleted"));
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    deleted_id = deleted->sandbox_id();
    ASSERT_TRUE(fd->DeleteSandbox(deleted_id).ok());
  }
  auto fd = *FrontDoor::Open(Options(dir.path().string()), clock, fleet.Factory());
  absl::StatusOr<v1::SandboxPlacement> retry = fd->CreateSandbox(Req("r-kept"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->sandbox_id(), kept_id);
  EXPECT_EQ(retry->state(), v1::SandboxPlacement::RUNNING);
  EXPECT_EQ(fd->CreateSandbox(Req("r-kept", kGiB)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(fd->CreateSandbox(Req("r-deleted")).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fleet.Total(), 1u);
}

}  // namespace
}  // namespace flotilla::scheduler
