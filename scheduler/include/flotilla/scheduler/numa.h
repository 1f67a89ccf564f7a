// NUMA topology from sysfs and the cut of a node's capacity into sub-NUMA partitions, each
// bound to one domain's CPUs (cpuset list) and memory node. Stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

struct NumaDomain {
  uint32_t node = 0;
  std::string cpus;  // cpulist, e.g. "0-15,32-47"
  uint32_t cpu_count = 0;
  uint64_t memory_bytes = 0;
};

// Reads <root>/devices/system/node/node*/{cpulist,meminfo} (root is normally "/sys").
// Domains without CPUs are skipped. NotFound when the directory is absent.
absl::StatusOr<std::vector<NumaDomain>> ReadNumaTopology(const std::string& sys_root = "/sys");

// Number of CPUs in a cpulist ("0-3,8" -> 5). InvalidArgument naming the text when malformed.
absl::StatusOr<uint32_t> CountCpuList(const std::string& cpulist);

// Cuts a node into `partitions_per_domain` partitions per domain. Each domain's share of
// `total_slots` and of memory is proportional to its CPUs; CPU millicores = cpus * 1000.
// Partitions are numbered 0.. in domain order.
std::vector<PartitionUsage> CutPartitions(const std::vector<NumaDomain>& domains, uint32_t total_slots,
                                          uint32_t partitions_per_domain = 1);

}  // namespace flotilla::scheduler
