#include "flotilla/scheduler/node_ledger.h"

#include "absl/strings/str_cat.h"

namespace flotilla::scheduler {

NodeLedger::NodeLedger(std::vector<PartitionUsage> partitions, const sandbox::AdmissionConfig& config)
    : check_(config) {
  NodeUsageSnapshot snapshot;
  for (size_t i = 0; i < partitions.size(); ++i) {
    partitions[i].used = {};
    partitions[i].index = static_cast<uint32_t>(i);  // a partition is named by its position
  }
  snapshot.partitions = std::move(partitions);
  usage_ = ToProto(snapshot);
}

v1::AdmitRequest NodeLedger::ToAdmit(uint32_t partition, const ResourceVector& request) const {
  v1::AdmitRequest req;
  req.mutable_resources()->set_memory_bytes(request.memory_bytes);
  req.mutable_resources()->set_cpu_quota_millicores(request.cpu_millicores);
  req.set_numa_partition(partition);
  return req;
}

absl::StatusOr<LedgerAdmitResult> NodeLedger::Admit(const std::string& sandbox_id, uint32_t partition,
                                                    const ResourceVector& request) {
  v1::AdmitRequest req = ToAdmit(partition, request);
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(sandbox_id)) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox ", sandbox_id, " is already on this node"));
  }
  v1::AdmitResponse d = check_.Decide(usage_, req);
  LedgerAdmitResult r;
  r.admitted = d.admitted();
  r.reason = d.reason();
  if (r.admitted) {
    usage_ = check_.Apply(usage_, req);
    // What Apply charged, so Release gives back exactly that.
    req.mutable_resources()->set_memory_bytes(check_.MemoryOf(req.resources()));
    req.mutable_resources()->set_cpu_quota_millicores(check_.CpuOf(req.resources()));
    sandboxes_.emplace(sandbox_id, std::move(req));
  }
  r.usage = FromProto(usage_);
  return r;
}

LedgerAdmitResult NodeLedger::Check(uint32_t partition, const ResourceVector& request) const {
  v1::AdmitRequest req = ToAdmit(partition, request);
  absl::MutexLock lock(&mu_);
  v1::AdmitResponse d = check_.Decide(usage_, req);
  return LedgerAdmitResult{d.admitted(), d.reason(), FromProto(usage_)};
}

absl::Status NodeLedger::Release(const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(sandbox_id);
  if (it == sandboxes_.end()) return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " is not on this node"));
  const v1::AdmitRequest& req = it->second;
  const uint64_t mem = req.resources().memory_bytes();
  const uint32_t cpu = req.resources().cpu_quota_millicores();
  auto sub = [](auto a, auto b) { return a > b ? a - b : 0; };
  usage_.set_memory_used(sub(usage_.memory_used(), mem));
  usage_.set_cpu_millicores_used(sub(usage_.cpu_millicores_used(), cpu));
  usage_.set_slots_used(sub(usage_.slots_used(), 1u));
  for (auto& p : *usage_.mutable_partitions()) {
    if (p.index() != req.numa_partition()) continue;
    p.set_memory_used(sub(p.memory_used(), mem));
    p.set_slots_used(sub(p.slots_used(), 1u));
  }
  sandboxes_.erase(it);
  return absl::OkStatus();
}

NodeUsageSnapshot NodeLedger::Usage() const {
  absl::MutexLock lock(&mu_);
  return FromProto(usage_);
}

v1::NodeUsage NodeLedger::UsageProto() const {
  absl::MutexLock lock(&mu_);
  return usage_;
}

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
  return {FromProto(usage_), std::move(ids)};
}

size_t NodeLedger::size() const {
  absl::MutexLock lock(&mu_);
  return sandboxes_.size();
}

}  // namespace flotilla::scheduler
