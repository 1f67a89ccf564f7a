// Node-local admission, the node ledger and sub-NUMA partitioning.
#include <fstream>

#include "flotilla/admission/admission_check.h"
#include "flotilla/admission/admission_limits.h"
#include "flotilla/scheduler/numa.h"
#include "flotilla/scheduler_sim/node_ledger.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::scheduler {
namespace {

using admission::AdmissionLimits;
using admission::AdmissionVerdict;

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
  admission::AdmissionConfig config;
  PartitionUsage partition;
  ResourceVector request;
  AdmissionVerdict want;
};

admission::AdmissionConfig Config(double memory_overcommit) {
  admission::AdmissionConfig c;
  c.memory_overcommit = memory_overcommit;
  return c;
}

// The engines' prediction (AdmissionLimits) and the node's own check (admission::AdmissionCheck)
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
    v1::AdmitResponse node_says = admission::AdmissionCheck(c.config).Decide(ToProto(node), req);
    EXPECT_EQ(node_says.admitted(), c.want == AdmissionVerdict::kAdmitted) << c.name << ": " << node_says.reason();
  }
}

TEST(AdmissionLimitsTest, RequestTakesTheNodesDefaultsAndValidateNamesTheField) {
  admission::AdmissionConfig c;
  c.default_memory_bytes = 3 * kGiB;
  c.default_cpu_millicores = 700;
  AdmissionLimits limits(c);
  EXPECT_EQ(limits.RequestOf(v1::Resources()), (ResourceVector{3 * kGiB, 700, 1}));
  v1::Resources r;
  r.set_memory_bytes(kGiB);
  r.set_cpu_quota_millicores(5);
  EXPECT_EQ(limits.RequestOf(r), (ResourceVector{kGiB, 5, 1}));
  // A CPU request beside the limit is what the node charges, so what the engines predict.
  r.set_cpu_request_millicores(2);
  EXPECT_EQ(limits.RequestOf(r), (ResourceVector{kGiB, 2, 1}));
  EXPECT_EQ(admission::AdmissionCheck(c).CpuOf(r), 2u);
  c.memory_warning = 1.5;
  absl::Status s = AdmissionLimits::Validate(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("memory_warning"), std::string::npos) << s;
  EXPECT_TRUE(AdmissionLimits::Validate(admission::AdmissionConfig{}).ok());
}

TEST(NodeLedgerTest, AdmitsCommitsReleasesAndRejectsWithUsage) {
  NodeLedger ledger({Partition(10 * kGiB, 4000, 2, 0, 0, 0), Partition(10 * kGiB, 4000, 2, 0, 0, 0)},
                    admission::AdmissionConfig{});
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

// The node's check over plain figures (what NodeLedger runs) and over NodeUsage protos (what
// the node agent runs) are one decision: same verdict, same words, on a two-partition node.
TEST(AdmissionCheckTest, PlainFiguresAndProtoDecideAlike) {
  struct Case {
    const char* name;
    uint64_t p1_memory_used;
    uint32_t p1_slots_used;
    uint32_t node_cpu_used;
    uint64_t memory;
    uint32_t cpu;
    const char* want_reason;  // "" when admitted
  };
  const Case cases[] = {
      {"fits", 0, 0, 0, kGiB, 100, ""},
      {"node cpu", 0, 0, 7600, kGiB, 1, "cpu_millicores: 7601 of 8000 (0.95 > 0.95) after placement"},
      {"partition memory", 8 * kGiB, 1, 0, kGiB + 1, 100,
       "partition 1 memory: 9.0 GiB of 10.0 GiB (0.90 > 0.90) after placement"},
      {"partition slots", 0, 4, 0, kGiB, 0, "partition 1 slots: 5 of 4 (1.25 > 1.00) after placement"},
  };
  admission::AdmissionCheck check(admission::AdmissionConfig{});
  for (const Case& c : cases) {
    admission::UsageFigures p0{10 * kGiB, 0, 0, 0, 4, 0};
    admission::UsageFigures p1{10 * kGiB, c.p1_memory_used, 0, 0, 4, c.p1_slots_used};
    admission::UsageFigures node{20 * kGiB, c.p1_memory_used, 8000, c.node_cpu_used, 8, c.p1_slots_used};
    admission::AdmissionOutcome plain = check.Check(node, &p1, 1, c.memory, c.cpu == 0 ? 1000 : c.cpu);
    EXPECT_EQ(admission::AdmissionCheck::Reason(plain), c.want_reason) << c.name;
    EXPECT_EQ(plain.admitted(), std::string(c.want_reason).empty()) << c.name;

    v1::NodeUsage usage;
    usage.set_memory_capacity(node.memory_capacity);
    usage.set_memory_used(node.memory_used);
    usage.set_cpu_millicores_capacity(node.cpu_millicores_capacity);
    usage.set_cpu_millicores_used(node.cpu_millicores_used);
    usage.set_slots_capacity(node.slots_capacity);
    usage.set_slots_used(node.slots_used);
    for (uint32_t i = 0; i < 2; ++i) {
      const admission::UsageFigures& f = i == 0 ? p0 : p1;
      v1::NumaPartition* q = usage.add_partitions();
      q->set_index(i);
      q->set_memory_capacity(f.memory_capacity);
      q->set_memory_used(f.memory_used);
      q->set_slots_capacity(f.slots_capacity);
      q->set_slots_used(f.slots_used);
    }
    v1::AdmitRequest req;
    req.set_numa_partition(1);
    req.mutable_resources()->set_memory_bytes(c.memory);
    req.mutable_resources()->set_cpu_quota_millicores(c.cpu);
    v1::AdmitResponse proto = check.Decide(usage, req);
    EXPECT_EQ(proto.admitted(), plain.admitted()) << c.name;
    EXPECT_EQ(proto.reason(), c.want_reason) << c.name;

    if (plain.admitted()) {
      v1::NodeUsage applied = check.Apply(usage, req);
      admission::AdmissionCheck::Add(node, &p1, c.memory, c.cpu);
      EXPECT_EQ(applied.memory_used(), node.memory_used) << c.name;
      EXPECT_EQ(applied.cpu_millicores_used(), node.cpu_millicores_used) << c.name;
      EXPECT_EQ(applied.slots_used(), node.slots_used) << c.name;
      EXPECT_EQ(applied.partitions(1).memory_used(), p1.memory_used) << c.name;
      EXPECT_EQ(applied.partitions(1).slots_used(), p1.slots_used) << c.name;
      admission::AdmissionCheck::Remove(node, &p1, c.memory, c.cpu);
      EXPECT_EQ(node.slots_used, c.p1_slots_used) << c.name;
      EXPECT_EQ(p1.memory_used, c.p1_memory_used) << c.name;
    }
  }
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
