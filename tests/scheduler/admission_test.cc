// Node-local admission, the node ledger and sub-NUMA partitioning.
#include <fstream>

#include "flotilla/scheduler/admission.h"
#include "flotilla/sandbox/admission.h"
#include "flotilla/scheduler/node_ledger.h"
#include "flotilla/scheduler/numa.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::scheduler {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

PartitionUsage Partition(uint64_t mem_cap, uint32_t cpu_cap, uint32_t slots_cap, uint64_t mem_used,
                         uint32_t cpu_used, uint32_t slots_used) {
  PartitionUsage p;
  p.capacity = {mem_cap, cpu_cap, slots_cap};
  p.used = {mem_used, cpu_used, slots_used};
  return p;
}

struct AdmitCase {
  const char* name;
  sandbox::AdmissionConfig config;
  PartitionUsage partition;
  ResourceVector request;
  AdmissionVerdict want;
};

sandbox::AdmissionConfig Config(double memory_overcommit) {
  sandbox::AdmissionConfig c;
  c.memory_overcommit = memory_overcommit;
  return c;
}

// The engines' prediction (AdmissionLimits) and the node's own check (sandbox::AdmissionCheck)
// must give the same answer on a one-partition node.
TEST(AdmissionLimitsTest, PredictsTheNodesOwnCheck) {
  const AdmitCase cases[] = {
      {"fits", Config(1.0), Partition(10 * kGiB, 4000, 10, 0, 0, 0), {kGiB, 1000, 1}, AdmissionVerdict::kAdmitted},
      // 9 GiB of 10 GiB is exactly the 0.90 warning: admitted; one byte more is not.
      {"memory at threshold", Config(1.0), Partition(10 * kGiB, 4000, 10, 8 * kGiB, 0, 1), {kGiB, 100, 1},
       AdmissionVerdict::kAdmitted},
      {"memory above threshold", Config(1.0), Partition(10 * kGiB, 4000, 10, 8 * kGiB + 1, 0, 1), {kGiB, 100, 1},
       AdmissionVerdict::kMemory},
      {"overcommit admits", Config(1.5), Partition(10 * kGiB, 4000, 10, 12 * kGiB, 0, 1), {kGiB, 100, 1},
       AdmissionVerdict::kAdmitted},
      {"overcommit limit", Config(1.5), Partition(10 * kGiB, 4000, 10, 13 * kGiB, 0, 1), {kGiB, 100, 1},
       AdmissionVerdict::kMemory},
      {"slots full", Config(1.0), Partition(10 * kGiB, 4000, 2, 0, 0, 2), {kGiB, 100, 1}, AdmissionVerdict::kSlots},
      {"cpu at threshold", Config(1.0), Partition(10 * kGiB, 4000, 10, 0, 2800, 1), {kGiB, 1000, 1},
       AdmissionVerdict::kAdmitted},
      {"cpu above", Config(1.0), Partition(10 * kGiB, 4000, 10, 0, 3000, 1), {kGiB, 1000, 1}, AdmissionVerdict::kCpu},
  };
  for (const AdmitCase& c : cases) {
    AdmissionLimits limits(c.config);
    EXPECT_EQ(limits.Check(c.partition.capacity, c.partition.used, c.request), c.want) << c.name;
    NodeUsageSnapshot node;
    node.partitions.push_back(c.partition);
    v1::AdmitRequest req;
    req.mutable_resources()->set_memory_bytes(c.request.memory_bytes);
    req.mutable_resources()->set_cpu_quota_millicores(c.request.cpu_millicores);
    v1::AdmitResponse node_says = sandbox::AdmissionCheck(c.config).Decide(ToProto(node), req);
    EXPECT_EQ(node_says.admitted(), c.want == AdmissionVerdict::kAdmitted) << c.name << ": " << node_says.reason();
  }
}

TEST(AdmissionLimitsTest, RequestTakesTheNodesDefaultsAndValidateNamesTheField) {
  sandbox::AdmissionConfig c;
  c.default_memory_bytes = 3 * kGiB;
  c.default_cpu_millicores = 700;
  AdmissionLimits limits(c);
  EXPECT_EQ(limits.RequestOf(v1::Resources()), (ResourceVector{3 * kGiB, 700, 1}));
  v1::Resources r;
  r.set_memory_bytes(kGiB);
  r.set_cpu_quota_millicores(5);
  EXPECT_EQ(limits.RequestOf(r), (ResourceVector{kGiB, 5, 1}));
  c.memory_warning = 1.5;
  absl::Status s = AdmissionLimits::Validate(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("memory_warning"), std::string::npos) << s;
  EXPECT_TRUE(AdmissionLimits::Validate(sandbox::AdmissionConfig{}).ok());
}

TEST(NodeLedgerTest, AdmitsCommitsReleasesAndRejectsWithUsage) {
  NodeLedger ledger({Partition(10 * kGiB, 4000, 2, 0, 0, 0), Partition(10 * kGiB, 4000, 2, 0, 0, 0)},
                    sandbox::AdmissionConfig{});
  auto a = ledger.Admit("a", 1, {kGiB, 10, 1});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->admitted);
  EXPECT_EQ(a->usage.partitions[1].used.slots, 1u);
  EXPECT_EQ(a->usage.partitions[1].used.memory_bytes, kGiB);
  EXPECT_EQ(a->usage.partitions[0].used.slots, 0u);
  EXPECT_EQ(ledger.UsageProto().cpu_millicores_used(), 10u);
  EXPECT_EQ(ledger.Admit("a", 1, {kGiB, 10, 1}).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(ledger.Admit("b", 1, {kGiB, 0, 1})->admitted);  // CPU 0: the node's default 1000m
  EXPECT_EQ(ledger.UsageProto().cpu_millicores_used(), 1010u);
  auto c = ledger.Admit("c", 1, {kGiB, 10, 1});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->admitted);
  EXPECT_NE(c->reason.find("slots"), std::string::npos) << c->reason;
  EXPECT_EQ(c->usage.partitions[1].used.slots, 2u);
  auto d = ledger.Admit("d", 7, {kGiB, 10, 1});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->admitted);
  EXPECT_EQ(d->reason, "numa_partition: no partition 7 on this node");
  EXPECT_EQ(ledger.size(), 2u);
  EXPECT_TRUE(ledger.Release("b").ok());
  EXPECT_EQ(ledger.Release("b").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ledger.Usage().partitions[1].used.slots, 1u);
  EXPECT_EQ(ledger.Usage().partitions[1].used.memory_bytes, kGiB);
  EXPECT_EQ(ledger.UsageProto().cpu_millicores_used(), 10u);
  EXPECT_EQ(ledger.UsageProto().slots_used(), 1u);
}

TEST(NumaTest, CountCpuList) {
  EXPECT_EQ(*CountCpuList("0-3,8"), 5u);
  EXPECT_EQ(*CountCpuList("0-1\n"), 2u);
  EXPECT_EQ(*CountCpuList(""), 0u);
  EXPECT_EQ(CountCpuList("3-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountCpuList("a").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NumaTest, ReadsSysfsTopologyAndCutsPartitions) {
  testing::TempDir dir;
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((dir.path() / rel).parent_path());
    std::ofstream(dir.path() / rel) << text;
  };
  write("devices/system/node/node0/cpulist", "0-5\n");
  write("devices/system/node/node0/meminfo", "Node 0 MemTotal:       6291456 kB\nNode 0 MemFree: 1 kB\n");
  write("devices/system/node/node1/cpulist", "6-7\n");
  write("devices/system/node/node1/meminfo", "Node 1 MemTotal:       2097152 kB\n");
  write("devices/system/node/node2/cpulist", "\n");  // memory-only domain: skipped
  write("devices/system/node/node2/meminfo", "Node 2 MemTotal:       2097152 kB\n");
  auto domains = ReadNumaTopology(dir.path().string());
  ASSERT_TRUE(domains.ok()) << domains.status();
  ASSERT_EQ(domains->size(), 2u);
  EXPECT_EQ((*domains)[0].cpus, "0-5");
  EXPECT_EQ((*domains)[0].cpu_count, 6u);
  EXPECT_EQ((*domains)[0].memory_bytes, 6 * kGiB);
  EXPECT_EQ((*domains)[1].node, 1u);

  std::vector<PartitionUsage> parts = CutPartitions(*domains, 100, 2);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].capacity.slots + parts[1].capacity.slots, 75u);  // 6 of 8 CPUs
  EXPECT_EQ(parts[2].capacity.slots + parts[3].capacity.slots, 25u);
  EXPECT_EQ(parts[0].capacity.memory_bytes, 3 * kGiB);
  EXPECT_EQ(parts[3].numa_node, 1u);
  EXPECT_EQ(parts[3].cpus, "6-7");
  EXPECT_EQ(parts[3].index, 3u);
  EXPECT_EQ(parts[0].capacity.cpu_millicores, 3000u);

  EXPECT_EQ(ReadNumaTopology((dir.path() / "nope").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST(NumaTest, ThisHostHasAtLeastOneDomain) {
  auto domains = ReadNumaTopology("/sys");
  ASSERT_TRUE(domains.ok()) << domains.status();
  ASSERT_FALSE(domains->empty());
  EXPECT_GT((*domains)[0].cpu_count, 0u);
  EXPECT_GT((*domains)[0].memory_bytes, 0u);
}

}  // namespace
}  // namespace flotilla::scheduler
