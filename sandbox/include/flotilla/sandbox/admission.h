// Node-local admission: does a placement fit under the node's warning thresholds?
//
// Pure arithmetic over flotilla.v1.NodeUsage, no kernel: the node agent uses it on every
// Create/Admit and the scheduler's simulator reuses it for its fake nodes.
//
//   AdmissionCheck check({.memory_warning = 0.9, .memory_overcommit = 1.5});
//   v1::AdmitResponse r = check.Decide(usage, request);   // r.admitted(), r.reason()
//
// Thread-safety: immutable after construction; Decide is const and may run concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.pb.h"

namespace flotilla::sandbox {

struct AdmissionConfig {
  // A placement is admitted when, after it, used/capacity stays at or below each threshold.
  double memory_warning = 0.90;
  double cpu_warning = 0.95;
  double slots_warning = 1.0;
  // Memory capacity counted for admission = physical memory x overcommit (>= 1).
  double memory_overcommit = 1.0;
  // Charged when a request leaves a field at 0.
  uint64_t default_memory_bytes = 1ull << 30;
  uint32_t default_cpu_millicores = 1000;
};

class AdmissionCheck {
 public:
  explicit AdmissionCheck(AdmissionConfig config = {});

  // InvalidArgument naming the field for thresholds outside (0, 1] or overcommit < 1.
  static absl::StatusOr<AdmissionCheck> Make(AdmissionConfig config);

  // Admitted when memory, cpu and slots (of the node, and of the requested NUMA partition when
  // the usage lists partitions) stay under their thresholds after adding `request`. The
  // response always carries `usage`; a rejection names the resource and the figures:
  // "memory: 29.1 GiB of 32.0 GiB (0.91 > 0.90) after placement".
  [[nodiscard]] v1::AdmitResponse Decide(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const;

  // What `request` adds, with the defaults applied.
  [[nodiscard]] uint64_t MemoryOf(const v1::Resources& r) const;
  [[nodiscard]] uint32_t CpuOf(const v1::Resources& r) const;

  // `usage` with `request` added (node totals and the partition), as the agent records it.
  [[nodiscard]] v1::NodeUsage Apply(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const;

  const AdmissionConfig& config() const { return config_; }

 private:
  AdmissionConfig config_;
};

}  // namespace flotilla::sandbox
