// Node-local admission, the node ledger and sub-NUMA partitioning.
#include <fstream>

#include "flotilla/scheduler/admission.h"
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
  AdmissionPolicy policy;
  PartitionUsage partition;
  ResourceVector request;
  AdmissionVerdict want;
  const char* want_reason;
};

TEST(AdmissionCheckTest, DecidesPerResourceAgainstWarningThresholds) {
  AdmissionPolicy no_overcommit;
  no_overcommit.memory_overcommit = 1.0;
  no_overcommit.cpu_overcommit = 1.0;
  AdmissionPolicy overcommit = no_overcommit;
  overcommit.memory_overcommit = 1.5;
  const AdmitCase cases[] = {
      {"fits", no_overcommit, Partition(10 * kGiB, 4000, 10, 0, 0, 0), {kGiB, 1000, 1}, AdmissionVerdict::kAdmitted, ""},
      // 9 GiB of 10 GiB is exactly the 0.90 warning: admitted; one byte more is not.
      {"memory at threshold", no_overcommit, Partition(10 * kGiB, 4000, 10, 8 * kGiB, 0, 1), {kGiB, 0, 1},
       AdmissionVerdict::kAdmitted, ""},
      {"memory above threshold", no_overcommit, Partition(10 * kGiB, 4000, 10, 8 * kGiB + 1, 0, 1), {kGiB, 0, 1},
       AdmissionVerdict::kMemory,
       "memory: 9.00GiB would exceed the warning limit of 9.00GiB in partition 0"},
      {"overcommit admits", overcommit, Partition(10 * kGiB, 4000, 10, 12 * kGiB, 0, 1), {kGiB, 0, 1},
       AdmissionVerdict::kAdmitted, ""},
      {"overcommit limit", overcommit, Partition(10 * kGiB, 4000, 10, 13 * kGiB, 0, 1), {kGiB, 0, 1},
       AdmissionVerdict::kMemory, "memory: 14.00GiB would exceed the warning limit of 13.50GiB in partition 0"},
      {"slots full", no_overcommit, Partition(10 * kGiB, 4000, 2, 0, 0, 2), {kGiB, 0, 1}, AdmissionVerdict::kSlots,
       "slots: 3 would exceed the warning limit of 2 in partition 0"},
      {"cpu above", no_overcommit, Partition(10 * kGiB, 4000, 10, 0, 3000, 1), {kGiB, 1000, 1}, AdmissionVerdict::kCpu,
       "cpu: 4000m would exceed the warning limit of 3800m in partition 0"},
      // A request without CPU quota is not held back by CPU.
      {"no cpu quota", no_overcommit, Partition(10 * kGiB, 4000, 10, 0, 4000, 1), {kGiB, 0, 1},
       AdmissionVerdict::kAdmitted, ""},
  };
  for (const AdmitCase& c : cases) {
    AdmissionCheck check(c.policy);
    AdmissionDecision d = check.Decide(c.partition, c.request);
    EXPECT_EQ(d.verdict, c.want) << c.name;
    EXPECT_EQ(d.admitted, c.want == AdmissionVerdict::kAdmitted) << c.name;
    EXPECT_EQ(d.reason, c.want_reason) << c.name;
    EXPECT_EQ(check.Check(c.partition.capacity, c.partition.used, c.request), c.want) << c.name;
  }
}

TEST(AdmissionPolicyTest, ValidateNamesTheField) {
  AdmissionPolicy p;
  p.memory_warning = 1.5;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Validate().message(), "memory_warning: must be in (0, 1], got 1.5");
  p = {};
  p.memory_overcommit = 0.5;
  EXPECT_EQ(p.Validate().message(), "memory_overcommit: must be >= 1, got 0.5");
  EXPECT_TRUE(AdmissionPolicy{}.Validate().ok());
}

TEST(AdmissionPolicyTest, FromConfigReadsFieldsAndRejectsTypos) {
  auto cfg = ParseConfig("memory_warning: 0.8\nmemory_overcommit: 2\n", "sched.yaml");
  ASSERT_TRUE(cfg.ok());
  auto p = AdmissionPolicy::FromConfig(*cfg);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->memory_warning, 0.8);
  EXPECT_DOUBLE_EQ(p->memory_overcommit, 2.0);
  auto bad = ParseConfig("memory_warnin: 0.8\n", "sched.yaml");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(AdmissionPolicy::FromConfig(*bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto out_of_range = ParseConfig("slots_warning: 0\n", "sched.yaml");
  ASSERT_TRUE(out_of_range.ok());
  auto s = AdmissionPolicy::FromConfig(*out_of_range).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("slots_warning"), std::string::npos) << s;
}

TEST(NodeLedgerTest, AdmitsCommitsReleasesAndRejectsWithUsage) {
  AdmissionPolicy policy;
  policy.memory_overcommit = 1.0;
  NodeLedger ledger({Partition(10 * kGiB, 4000, 2, 0, 0, 0), Partition(10 * kGiB, 4000, 2, 0, 0, 0)}, policy);
  auto a = ledger.Admit("a", 1, {kGiB, 0, 1});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->decision.admitted);
  EXPECT_EQ(a->usage.partitions[1].used.slots, 1u);
  EXPECT_EQ(a->usage.partitions[0].used.slots, 0u);
  EXPECT_EQ(ledger.Admit("a", 1, {kGiB, 0, 1}).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(ledger.Admit("b", 1, {kGiB, 0, 1})->decision.admitted);
  auto c = ledger.Admit("c", 1, {kGiB, 0, 1});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->decision.admitted);
  EXPECT_EQ(c->decision.verdict, AdmissionVerdict::kSlots);
  EXPECT_EQ(c->usage.partitions[1].used.slots, 2u);
  auto d = ledger.Admit("d", 7, {kGiB, 0, 1});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->decision.verdict, AdmissionVerdict::kNoSuchPartition);
  EXPECT_EQ(ledger.size(), 2u);
  EXPECT_TRUE(ledger.Release("a").ok());
  EXPECT_EQ(ledger.Release("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ledger.Usage().partitions[1].used, (ResourceVector{kGiB, 0, 1}));
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
