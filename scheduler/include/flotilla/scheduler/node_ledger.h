// The node-side record of committed sandboxes, with admission: every placement runs through
// sandbox::AdmissionCheck (the node agent's own check) over the node's NodeUsage, and is
// committed with AdmissionCheck::Apply only when admitted. The simulator's nodes and the
// tests' ledger-backed node agents are built on it.
//
// Thread-safe: every method takes the ledger's own mutex (one node, one lock).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/sandbox/admission.h"
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
  NodeLedger(std::vector<PartitionUsage> partitions, const sandbox::AdmissionConfig& config);
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
  v1::AdmitRequest ToAdmit(uint32_t partition, const ResourceVector& request) const;

  const sandbox::AdmissionCheck check_;
  mutable absl::Mutex mu_;
  v1::NodeUsage usage_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, v1::AdmitRequest> sandboxes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flotilla::scheduler
