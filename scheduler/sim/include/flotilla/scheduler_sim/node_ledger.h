// The node-side record of committed sandboxes, with admission: every placement runs through
// admission::AdmissionCheck (the node agent's own check, over its plain-figure form) and is
// committed with AdmissionCheck::Add only when admitted. Usage is kept as plain figures, so
// an admission allocates nothing beyond the sandbox's entry. The simulator's nodes and the
// tests' ledger-backed node agents are built on it.
//
// Thread-safe: every method takes the ledger's own mutex (one node, one lock).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/admission/admission_check.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

struct LedgerAdmitResult {
  bool admitted = false;
  std::string reason;       // the node's words when it rejects
  NodeUsageSnapshot usage;  // after the commit (or unchanged, on reject)
};

class NodeLedger {
 public:
  // `partitions` gives each partition's capacity (their `used` is ignored); the node's CPU is
  // the partitions' sum. InvalidArgument-worthy configs CHECK-fail: validate them first.
  NodeLedger(std::vector<PartitionUsage> partitions, const admission::AdmissionConfig& config);
  NodeLedger(const NodeLedger&) = delete;
  NodeLedger& operator=(const NodeLedger&) = delete;

  // Admits and commits `request` (memory and CPU as charged; 0 takes the node's defaults)
  // for `sandbox_id` in `partition`. AlreadyExists when the id is committed already. A
  // rejection is not an error: see result.admitted.
  absl::StatusOr<LedgerAdmitResult> Admit(const std::string& sandbox_id, uint32_t partition,
                                          const ResourceVector& request);
  // Checks without committing (the NodeAgent.Admit RPC).
  [[nodiscard]] LedgerAdmitResult Check(uint32_t partition, const ResourceVector& request) const;
  // Releases a committed sandbox. NotFound when unknown.
  absl::Status Release(const std::string& sandbox_id);

  [[nodiscard]] NodeUsageSnapshot Usage() const;
  [[nodiscard]] v1::NodeUsage UsageProto() const;
  [[nodiscard]] std::vector<std::string> SandboxIds() const;
  // Usage and ids taken together under one lock (for heartbeats).
  [[nodiscard]] std::pair<NodeUsageSnapshot, std::vector<std::string>> Snapshot() const;
  [[nodiscard]] size_t size() const;

 private:
  // What a committed sandbox was charged, so Release gives back exactly that.
  struct Charge {
    uint32_t partition = 0;
    uint64_t memory_bytes = 0;
    uint32_t cpu_millicores = 0;
  };
  // The node's reason to refuse; empty when it admits.
  std::string Decide(uint32_t partition, uint64_t memory, uint32_t cpu) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillUsage(NodeUsageSnapshot& out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const admission::AdmissionCheck check_;
  NodeUsageSnapshot shape_;  // fixed: index, NUMA node, cpus and capacity of each partition
  mutable absl::Mutex mu_;
  admission::UsageFigures node_ ABSL_GUARDED_BY(mu_);
  absl::InlinedVector<admission::UsageFigures, 2> partitions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Charge> sandboxes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flotilla::scheduler
