// Node-local admission: the check a node runs on every placement before it commits one.
// Kernel-free, so the node agent, the simulator and the placement engines' predictions all
// run this one implementation.
//
//   AdmissionPolicy policy;                 // warning thresholds, memory overcommit
//   AdmissionCheck check(policy);
//   AdmissionDecision d = check.Decide(partition, request);
//   if (!d.admitted) reply(d.reason, usage);
//
// AdmissionCheck is immutable after construction and thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "flotilla/common/config.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

// Per-resource warning thresholds, as fractions of (overcommitted) capacity. A placement is
// admitted only if, after it, every resource stays at or below its threshold.
struct AdmissionPolicy {
  double memory_warning = 0.90;
  double cpu_warning = 0.95;
  double slots_warning = 1.00;
  // Memory capacity is multiplied by this before the threshold (sandboxes rarely touch all
  // of their limit); 1.0 means no overcommit.
  double memory_overcommit = 1.25;
  // CPU quota is shareable: capacity is multiplied by this.
  double cpu_overcommit = 4.0;

  // Fields of a YAML map: memory_warning, cpu_warning, slots_warning, memory_overcommit,
  // cpu_overcommit. Errors name the field.
  static absl::StatusOr<AdmissionPolicy> FromConfig(const ConfigNode& node);
  // InvalidArgument naming the field when a threshold is outside (0, 1] or an overcommit < 1.
  [[nodiscard]] absl::Status Validate() const;
};

enum class AdmissionVerdict {
  kAdmitted,
  kNoSuchPartition,
  kSlots,
  kMemory,
  kCpu,
};

struct AdmissionDecision {
  bool admitted = false;
  AdmissionVerdict verdict = AdmissionVerdict::kNoSuchPartition;
  // Empty when admitted; otherwise "memory: 29.5GiB of 30.0GiB warning limit" style.
  std::string reason;
};

class AdmissionCheck {
 public:
  explicit AdmissionCheck(const AdmissionPolicy& policy);

  // Admit `request` into `partition` given its current usage.
  [[nodiscard]] AdmissionDecision Decide(const PartitionUsage& partition,
                                         const ResourceVector& request) const;
  // The same check without the reason text (the engines' hot path).
  [[nodiscard]] AdmissionVerdict Check(const ResourceVector& capacity, const ResourceVector& used,
                                       const ResourceVector& request) const;
  // The same against precomputed Limits(capacity).
  [[nodiscard]] static AdmissionVerdict CheckLimits(const ResourceVector& limits, const ResourceVector& used,
                                                    const ResourceVector& request);

  // Largest usage each resource may reach in a partition of this capacity.
  [[nodiscard]] ResourceVector Limits(const ResourceVector& capacity) const;
  [[nodiscard]] const AdmissionPolicy& policy() const { return policy_; }

 private:
  AdmissionPolicy policy_;
};

}  // namespace flotilla::scheduler
