#include "flotilla/scheduler_sim/node_ledger.h"

#include "absl/strings/str_cat.h"

namespace flotilla::scheduler {

NodeLedger::NodeLedger(std::vector<PartitionUsage> partitions, const admission::AdmissionConfig& config)
    : check_(config) {
  for (size_t i = 0; i < partitions.size(); ++i) {
    PartitionUsage& p = partitions[i];
    p.used = {};
    p.index = static_cast<uint32_t>(i);  // a partition is named by its position
    node_.memory_capacity += p.capacity.memory_bytes;
    node_.cpu_millicores_capacity += p.capacity.cpu_millicores;
    node_.slots_capacity += p.capacity.slots;
    partitions_.push_back({p.capacity.memory_bytes, 0, 0, 0, p.capacity.slots, 0});
    shape_.partitions.push_back(std::move(p));
  }
}

std::string NodeLedger::Decide(uint32_t partition, uint64_t memory, uint32_t cpu) const {
  if (partition >= partitions_.size()) {
    return absl::StrCat("numa_partition: no partition ", partition, " on this node");
  }
  admission::AdmissionOutcome d = check_.Check(node_, &partitions_[partition], partition, memory, cpu);
  return d.admitted() ? std::string() : admission::AdmissionCheck::Reason(d);
}

// The wire form carries no per-partition CPU: the node's CPU is split evenly, as FromProto
// does for a real node's report, so the simulator's reports read exactly like an agent's.
void NodeLedger::FillUsage(NodeUsageSnapshot& out) const {
  out.partitions = shape_.partitions;
  const uint32_t n = static_cast<uint32_t>(partitions_.size());
  for (uint32_t i = 0; i < n; ++i) {
    PartitionUsage& p = out.partitions[i];
    p.capacity.cpu_millicores = node_.cpu_millicores_capacity / n;
    p.used = {partitions_[i].memory_used, node_.cpu_millicores_used / n, partitions_[i].slots_used};
  }
}

absl::StatusOr<LedgerAdmitResult> NodeLedger::Admit(const std::string& sandbox_id, uint32_t partition,
                                                    const ResourceVector& request) {
  const uint64_t mem = request.memory_bytes != 0 ? request.memory_bytes : check_.config().default_memory_bytes;
  const uint32_t cpu = request.cpu_millicores != 0 ? request.cpu_millicores : check_.config().default_cpu_millicores;
  LedgerAdmitResult r;
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = sandboxes_.try_emplace(sandbox_id);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox ", sandbox_id, " is already on this node"));
  }
  r.reason = Decide(partition, mem, cpu);
  r.admitted = r.reason.empty();
  if (r.admitted) {
    admission::AdmissionCheck::Add(node_, &partitions_[partition], mem, cpu);
    it->second = Charge{partition, mem, cpu};
  } else {
    sandboxes_.erase(it);
  }
  FillUsage(r.usage);
  return r;
}

LedgerAdmitResult NodeLedger::Check(uint32_t partition, const ResourceVector& request) const {
  const uint64_t mem = request.memory_bytes != 0 ? request.memory_bytes : check_.config().default_memory_bytes;
  const uint32_t cpu = request.cpu_millicores != 0 ? request.cpu_millicores : check_.config().default_cpu_millicores;
  LedgerAdmitResult r;
  absl::MutexLock lock(&mu_);
  r.reason = Decide(partition, mem, cpu);
  r.admitted = r.reason.empty();
  FillUsage(r.usage);
  return r;
}

absl::Status NodeLedger::Release(const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(sandbox_id);
  if (it == sandboxes_.end()) return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " is not on this node"));
  const Charge& c = it->second;
  admission::AdmissionCheck::Remove(node_, &partitions_[c.partition], c.memory_bytes, c.cpu_millicores);
  sandboxes_.erase(it);
  return absl::OkStatus();
}

NodeUsageSnapshot NodeLedger::Usage() const {
  NodeUsageSnapshot out;
  absl::MutexLock lock(&mu_);
  FillUsage(out);
  return out;
}

v1::NodeUsage NodeLedger::UsageProto() const { return ToProto(Usage()); }

std::vector<std::string> NodeLedger::SandboxIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  ids.reserve(sandboxes_.size());
  for (const auto& [id, e] : sandboxes_) ids.push_back(id);
  return ids;
}

std::pair<NodeUsageSnapshot, std::vector<std::string>> NodeLedger::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  ids.reserve(sandboxes_.size());
  for (const auto& [id, e] : sandboxes_) ids.push_back(id);
  NodeUsageSnapshot usage;
  FillUsage(usage);
  return {std::move(usage), std::move(ids)};
}

size_t NodeLedger::size() const {
  absl::MutexLock lock(&mu_);
  return sandboxes_.size();
}

}  // namespace flotilla::scheduler
