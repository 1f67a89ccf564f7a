// Resource vectors and per-partition usage: the vocabulary shared by node-local admission,
// the placement engines' views and the simulator. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "flotilla/admission/resource_vector.h"
#include "flotilla/proto/sandbox.pb.h"

namespace flotilla::scheduler {

// What one sandbox asks for (or what a partition has / has committed): the admission library's.
using ResourceVector = admission::ResourceVector;

// One sub-NUMA partition of a node: a worker slot range bound to one NUMA domain's CPUs
// (cpuset list) and memory node.
struct PartitionUsage {
  uint32_t index = 0;
  uint32_t numa_node = 0;
  std::string cpus;
  ResourceVector capacity;
  ResourceVector used;
};

// A node's usage, partition by partition. Node totals are the partitions' sums. Nodes have
// one or two partitions as a rule, held inline so a snapshot is copied without allocating.
struct NodeUsageSnapshot {
  absl::InlinedVector<PartitionUsage, 2> partitions;

  [[nodiscard]] ResourceVector TotalCapacity() const;
  [[nodiscard]] ResourceVector TotalUsed() const;
};

// Wire conversions (NodeUsage carries totals and the partitions).
[[nodiscard]] v1::NodeUsage ToProto(const NodeUsageSnapshot& usage);
[[nodiscard]] NodeUsageSnapshot FromProto(const v1::NodeUsage& usage);

}  // namespace flotilla::scheduler
