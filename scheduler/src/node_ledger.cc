#include "flotilla/scheduler/node_ledger.h"

#include "absl/strings/str_cat.h"

namespace flotilla::scheduler {

NodeLedger::NodeLedger(std::vector<PartitionUsage> partitions, const AdmissionPolicy& policy)
    : check_(policy) {
  for (auto& p : partitions) p.used = {};
  usage_.partitions = std::move(partitions);
}

absl::StatusOr<LedgerAdmitResult> NodeLedger::Admit(const std::string& sandbox_id, uint32_t partition,
                                                    const ResourceVector& request) {
  absl::MutexLock lock(&mu_);
  LedgerAdmitResult r;
  if (sandboxes_.contains(sandbox_id)) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox ", sandbox_id, " is already on this node"));
  }
  if (partition >= usage_.partitions.size()) {
    r.decision.verdict = AdmissionVerdict::kNoSuchPartition;
    r.decision.reason = absl::StrCat("numa_partition: no partition ", partition, " (node has ",
                                     usage_.partitions.size(), ")");
  } else {
    PartitionUsage& p = usage_.partitions[partition];
    r.decision = check_.Decide(p, request);
    if (r.decision.admitted) {
      p.used += request;
      sandboxes_.emplace(sandbox_id, Entry{partition, request});
    }
  }
  r.usage = usage_;
  return r;
}

LedgerAdmitResult NodeLedger::Check(uint32_t partition, const ResourceVector& request) const {
  absl::MutexLock lock(&mu_);
  LedgerAdmitResult r;
  if (partition >= usage_.partitions.size()) {
    r.decision.verdict = AdmissionVerdict::kNoSuchPartition;
    r.decision.reason = absl::StrCat("numa_partition: no partition ", partition, " (node has ",
                                     usage_.partitions.size(), ")");
  } else {
    r.decision = check_.Decide(usage_.partitions[partition], request);
  }
  r.usage = usage_;
  return r;
}

absl::Status NodeLedger::Release(const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(sandbox_id);
  if (it == sandboxes_.end()) return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " is not on this node"));
  usage_.partitions[it->second.partition].used -= it->second.request;
  sandboxes_.erase(it);
  return absl::OkStatus();
}

NodeUsageSnapshot NodeLedger::Usage() const {
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
  return {usage_, std::move(ids)};
}

size_t NodeLedger::size() const {
  absl::MutexLock lock(&mu_);
  return sandboxes_.size();
}

}  // namespace flotilla::scheduler
