// AdmissionCheck and ReadNodeCapacity: pure arithmetic and a sysfs fixture, no kernel.
#include "flotilla/admission/admission_check.h"

#include <filesystem>
#include <fstream>

#include "flotilla/node/node_agent.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::node {
namespace {

using admission::AdmissionCheck;
using admission::AdmissionConfig;

constexpr uint64_t kGiB = 1ull << 30;

v1::NodeUsage Node(uint64_t mem_cap, uint64_t mem_used, uint32_t slots_cap = 100, uint32_t slots_used = 0) {
  v1::NodeUsage u;
  u.set_memory_capacity(mem_cap);
  u.set_memory_used(mem_used);
  u.set_cpu_millicores_capacity(16000);
  u.set_slots_capacity(slots_cap);
  u.set_slots_used(slots_used);
  return u;
}

v1::AdmitRequest Req(uint64_t mem, uint32_t cpu = 1000, uint32_t partition = 0) {
  v1::AdmitRequest r;
  r.mutable_resources()->set_memory_bytes(mem);
  r.mutable_resources()->set_cpu_quota_millicores(cpu);
  r.set_numa_partition(partition);
  return r;
}

// A usage reported near 2^64 (a broken or hostile node) once wrapped the sum to a small one
// and admitted; the fuzz target of the node's requests found it.
TEST(AdmissionCheckTest, RefusesWhatWouldWrapTheMemoryFigure) {
  AdmissionCheck check(AdmissionConfig{.memory_overcommit = 1.5});
  const v1::NodeUsage usage = Node(~0ull, ~0ull - (1ull << 20));
  const v1::AdmitResponse r = check.Decide(usage, Req(kGiB));
  EXPECT_FALSE(r.admitted());
  EXPECT_TRUE(r.reason().starts_with("memory: ")) << r.reason();
  EXPECT_EQ(r.usage().memory_used(), usage.memory_used());
}

TEST(AdmissionCheckTest, AdmitsUnderAndRejectsAboveTheWarningThreshold) {
  struct Case {
    uint64_t used, request;
    double overcommit;
    bool admitted;
    std::string reason;
  } cases[] = {
      {0, 28 * kGiB, 1.0, true, ""},
      {28 * kGiB, 1 * kGiB, 1.0, false, "memory: 29.0 GiB of 32.0 GiB (0.91 > 0.90) after placement"},
      {28 * kGiB, 2 * kGiB, 1.5, true, ""},
      {40 * kGiB, 4 * kGiB, 1.5, false, "memory: 44.0 GiB of 48.0 GiB (0.92 > 0.90) after placement"},
  };
  for (const Case& c : cases) {
    AdmissionCheck check(AdmissionConfig{.memory_warning = 0.90, .memory_overcommit = c.overcommit});
    v1::AdmitResponse r = check.Decide(Node(32 * kGiB, c.used), Req(c.request));
    EXPECT_EQ(r.admitted(), c.admitted) << c.used << " " << c.request;
    EXPECT_EQ(r.reason(), c.reason);
    EXPECT_EQ(r.usage().memory_used(), c.used);  // the usage as it was
  }
}

TEST(AdmissionCheckTest, RejectsOnSlotsAndCpuAndUnknownPartition) {
  AdmissionCheck check;
  v1::AdmitResponse r = check.Decide(Node(64 * kGiB, 0, 10, 10), Req(kGiB));
  EXPECT_FALSE(r.admitted());
  EXPECT_EQ(r.reason(), "slots: 11 of 10 (1.10 > 1.00) after placement");
  v1::NodeUsage u = Node(64 * kGiB, 0);
  u.set_cpu_millicores_used(15500);
  r = check.Decide(u, Req(kGiB, 1000));
  EXPECT_FALSE(r.admitted());
  EXPECT_EQ(r.reason(), "cpu_millicores: 16500 of 16000 (1.03 > 0.95) after placement");
  u = Node(64 * kGiB, 0);
  v1::NumaPartition* p = u.add_partitions();
  p->set_index(0);
  p->set_memory_capacity(32 * kGiB);
  p->set_slots_capacity(50);
  r = check.Decide(u, Req(kGiB, 1000, 3));
  EXPECT_FALSE(r.admitted());
  EXPECT_EQ(r.reason(), "numa_partition: no partition 3 on this node");
  p->set_memory_used(29 * kGiB);
  r = check.Decide(u, Req(kGiB, 1000, 0));
  EXPECT_FALSE(r.admitted());
  EXPECT_EQ(r.reason(), "partition 0 memory: 30.0 GiB of 32.0 GiB (0.94 > 0.90) after placement");
}

TEST(AdmissionCheckTest, ApplyAddsToNodeAndPartitionWithDefaults) {
  AdmissionCheck check(AdmissionConfig{.default_memory_bytes = 2 * kGiB, .default_cpu_millicores = 500});
  v1::NodeUsage u = Node(64 * kGiB, kGiB);
  u.add_partitions()->set_index(0);
  u.add_partitions()->set_index(1);
  v1::AdmitRequest r;
  r.set_numa_partition(1);
  v1::NodeUsage after = check.Apply(u, r);
  EXPECT_EQ(after.memory_used(), 3 * kGiB);
  EXPECT_EQ(after.cpu_millicores_used(), 500u);
  EXPECT_EQ(after.slots_used(), 1u);
  EXPECT_EQ(after.partitions(0).memory_used(), 0u);
  EXPECT_EQ(after.partitions(1).memory_used(), 2 * kGiB);
  EXPECT_EQ(after.partitions(1).slots_used(), 1u);
}

TEST(AdmissionCheckTest, ReleaseUndoesApplyAndStopsAtZero) {
  AdmissionCheck check(AdmissionConfig{.default_memory_bytes = 2 * kGiB, .default_cpu_millicores = 500});
  v1::NodeUsage u = Node(64 * kGiB, kGiB);
  u.add_partitions()->set_index(0);
  u.add_partitions()->set_index(1);
  v1::AdmitRequest r;
  r.set_numa_partition(1);
  v1::NodeUsage back = check.Release(check.Apply(u, r), r);
  EXPECT_EQ(back.memory_used(), kGiB);
  EXPECT_EQ(back.cpu_millicores_used(), 0u);
  EXPECT_EQ(back.slots_used(), 0u);
  EXPECT_EQ(back.partitions(1).memory_used(), 0u);
  EXPECT_EQ(back.partitions(1).slots_used(), 0u);
  // Releasing what was never charged leaves every figure at zero, not wrapped around.
  v1::NodeUsage twice = check.Release(back, r);
  EXPECT_EQ(twice.memory_used(), 0u);
  EXPECT_EQ(twice.slots_used(), 0u);
  EXPECT_EQ(twice.partitions(1).memory_used(), 0u);
}

TEST(AdmissionCheckTest, MakeNamesTheBadField) {
  EXPECT_EQ(AdmissionCheck::Make({.memory_warning = 1.5}).status().message(), "memory_warning: must be in (0, 1], got 1.5");
  EXPECT_EQ(AdmissionCheck::Make({.memory_overcommit = 0.5}).status().message(), "memory_overcommit: must be >= 1, got 0.5");
  EXPECT_TRUE(AdmissionCheck::Make({}).ok());
}

TEST(NodeCapacityTest, ReadsNumaPartitionsFromSysfs) {
  flotilla::testing::TempDir dir;
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((dir.path() / rel).parent_path());
    std::ofstream(dir.path() / rel) << text;
  };
  write("devices/system/node/node0/cpulist", "0-7\n");
  write("devices/system/node/node0/meminfo", "Node 0 MemTotal:       16777216 kB\nNode 0 MemFree: 1 kB\n");
  write("devices/system/node/node1/cpulist", "8-11,16-19\n");
  write("devices/system/node/node1/meminfo", "Node 1 MemTotal:       8388608 kB\n");
  auto u = ReadNodeCapacity(dir.path().string(), 10, 2);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->memory_capacity(), 24 * kGiB);
  EXPECT_EQ(u->cpu_millicores_capacity(), 16000u);
  EXPECT_EQ(u->slots_capacity(), 10u);
  ASSERT_EQ(u->partitions_size(), 4);
  EXPECT_EQ(u->partitions(0).cpus(), "0-3");
  EXPECT_EQ(u->partitions(1).cpus(), "4-7");
  EXPECT_EQ(u->partitions(2).cpus(), "8-11");
  EXPECT_EQ(u->partitions(3).cpus(), "16-19");
  EXPECT_EQ(u->partitions(3).numa_node(), 1u);
  EXPECT_EQ(u->partitions(0).memory_capacity(), 8 * kGiB);
  EXPECT_EQ(u->partitions(2).memory_capacity(), 4 * kGiB);
  EXPECT_EQ(u->partitions(0).slots_capacity() + u->partitions(1).slots_capacity() + u->partitions(2).slots_capacity() +
                u->partitions(3).slots_capacity(),
            10u);
  EXPECT_EQ(ReadNodeCapacity(dir.path().string(), 10, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::node
