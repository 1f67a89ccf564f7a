// The placement engines' prediction of a node's admission decision. The node's own check is
// AdmissionCheck (admission_check.h: one implementation, run by the node agent and by the
// simulator's nodes through NodeLedger); AdmissionLimits restates its thresholds as plain arithmetic over
// ResourceVectors so an engine can test hundreds of partitions per placement. It checks CPU
// per partition (the node's CPU split evenly), which is never looser than the node's
// whole-node CPU check. Tests hold the two in agreement.
//
// Immutable after construction; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "flotilla/proto/sandbox.pb.h"
#include "flotilla/admission/admission_check.h"
#include "flotilla/admission/resource_vector.h"

namespace flotilla::admission {

enum class AdmissionVerdict {
  kAdmitted,
  kSlots,
  kMemory,
  kCpu,
};

class AdmissionLimits {
 public:
  explicit AdmissionLimits(const AdmissionConfig& config);

  // InvalidArgument naming the field when the config is out of range (as the node says).
  static absl::Status Validate(const AdmissionConfig& config);

  // What a request charges, with the node's defaults for fields left at 0.
  [[nodiscard]] ResourceVector RequestOf(const v1::Resources& r) const;
  // Largest usage each resource may reach in a partition of this capacity.
  [[nodiscard]] ResourceVector Limits(const ResourceVector& capacity) const;
  [[nodiscard]] AdmissionVerdict Check(const ResourceVector& capacity, const ResourceVector& used,
                                       const ResourceVector& request) const;
  // The same against precomputed Limits(capacity).
  [[nodiscard]] static AdmissionVerdict CheckLimits(const ResourceVector& limits, const ResourceVector& used,
                                                    const ResourceVector& request) {
    // Inline: the engines run it for every partition of their view on every placement.
    if (used.memory_bytes + request.memory_bytes > limits.memory_bytes) return AdmissionVerdict::kMemory;
    if (used.cpu_millicores + request.cpu_millicores > limits.cpu_millicores) return AdmissionVerdict::kCpu;
    if (used.slots + request.slots > limits.slots) return AdmissionVerdict::kSlots;
    return AdmissionVerdict::kAdmitted;
  }
  [[nodiscard]] const AdmissionConfig& config() const { return config_; }

 private:
  AdmissionConfig config_;
};

}  // namespace flotilla::admission
