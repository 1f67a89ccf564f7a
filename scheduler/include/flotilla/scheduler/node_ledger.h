// The node-side record of committed sandboxes per sub-NUMA partition, with admission.
// A node agent (or a simulated node) owns one ledger and runs every placement through
// Admit(), which checks with AdmissionCheck and commits atomically.
//
// Thread-safe: every method takes the ledger's own mutex (one node, one lock).
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/scheduler/admission.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

struct LedgerAdmitResult {
  AdmissionDecision decision;
  NodeUsageSnapshot usage;  // after the commit (or unchanged, on reject)
};

class NodeLedger {
 public:
  // `partitions` gives each partition's capacity; their `used` fields are ignored.
  NodeLedger(std::vector<PartitionUsage> partitions, const AdmissionPolicy& policy);
  NodeLedger(const NodeLedger&) = delete;
  NodeLedger& operator=(const NodeLedger&) = delete;

  // Admits and commits `request` for `sandbox_id` in `partition`. AlreadyExists when the id is
  // committed already. A rejection is not an error: see result.decision.
  absl::StatusOr<LedgerAdmitResult> Admit(const std::string& sandbox_id, uint32_t partition,
                                          const ResourceVector& request);
  // Checks without committing (the NodeAgent.Admit RPC).
  [[nodiscard]] LedgerAdmitResult Check(uint32_t partition, const ResourceVector& request) const;
  // Releases a committed sandbox. NotFound when unknown.
  absl::Status Release(const std::string& sandbox_id);

  [[nodiscard]] NodeUsageSnapshot Usage() const;
  [[nodiscard]] std::vector<std::string> SandboxIds() const;
  // Usage and ids taken together under one lock (for heartbeats).
  [[nodiscard]] std::pair<NodeUsageSnapshot, std::vector<std::string>> Snapshot() const;
  [[nodiscard]] size_t size() const;

 private:
  struct Entry {
    uint32_t partition;
    ResourceVector request;
  };
  const AdmissionCheck check_;
  mutable absl::Mutex mu_;
  NodeUsageSnapshot usage_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Entry> sandboxes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flotilla::scheduler
