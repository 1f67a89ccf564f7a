#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

ResourceVector NodeUsageSnapshot::TotalCapacity() const {
  ResourceVector total;
  for (const auto& p : partitions) total += p.capacity;
  return total;
}

ResourceVector NodeUsageSnapshot::TotalUsed() const {
  ResourceVector total;
  for (const auto& p : partitions) total += p.used;
  return total;
}

v1::NodeUsage ToProto(const NodeUsageSnapshot& usage) {
  v1::NodeUsage out;
  ResourceVector cap = usage.TotalCapacity();
  ResourceVector used = usage.TotalUsed();
  out.set_memory_capacity(cap.memory_bytes);
  out.set_memory_used(used.memory_bytes);
  out.set_cpu_millicores_capacity(cap.cpu_millicores);
  out.set_cpu_millicores_used(used.cpu_millicores);
  out.set_slots_capacity(cap.slots);
  out.set_slots_used(used.slots);
  for (const auto& p : usage.partitions) {
    v1::NumaPartition* q = out.add_partitions();
    q->set_index(p.index);
    q->set_numa_node(p.numa_node);
    q->set_cpus(p.cpus);
    q->set_memory_capacity(p.capacity.memory_bytes);
    q->set_memory_used(p.used.memory_bytes);
    q->set_slots_capacity(p.capacity.slots);
    q->set_slots_used(p.used.slots);
  }
  return out;
}

NodeUsageSnapshot FromProto(const v1::NodeUsage& usage) {
  NodeUsageSnapshot out;
  const int n = usage.partitions_size();
  if (n == 0) {
    // A node that reports no partitions is one partition holding everything.
    PartitionUsage p;
    p.capacity = {usage.memory_capacity(), usage.cpu_millicores_capacity(), usage.slots_capacity()};
    p.used = {usage.memory_used(), usage.cpu_millicores_used(), usage.slots_used()};
    out.partitions.push_back(std::move(p));
    return out;
  }
  // The wire has no per-partition CPU figures: the node's CPU is split evenly.
  for (int i = 0; i < n; ++i) {
    const v1::NumaPartition& q = usage.partitions(i);
    PartitionUsage p;
    p.index = q.index();
    p.numa_node = q.numa_node();
    p.cpus = q.cpus();
    p.capacity = {q.memory_capacity(), usage.cpu_millicores_capacity() / static_cast<uint32_t>(n),
                  q.slots_capacity()};
    p.used = {q.memory_used(), usage.cpu_millicores_used() / static_cast<uint32_t>(n), q.slots_used()};
    out.partitions.push_back(std::move(p));
  }
  return out;
}

}  // namespace flotilla::scheduler
