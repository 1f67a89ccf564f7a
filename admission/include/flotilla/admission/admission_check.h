// Node-local admission: does a placement fit under the node's warning thresholds?
//
// Pure arithmetic, no kernel: the node agent (node/) uses it on every Create/Admit, and the
// scheduler's simulated nodes (scheduler/sim/) reuse it; the placement engines' prediction
// (AdmissionLimits, admission_limits.h) restates the same thresholds. One library, so the
// node and the scheduler never disagree on the arithmetic. The decision itself (Check/Add) works
// over plain figures so a caller that keeps usage as plain values pays no protobuf copies;
// Decide/Apply are the same decision over flotilla.v1.NodeUsage.
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

namespace flotilla::admission {

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

// A node's (or one NUMA partition's) usage as plain figures. A partition has no CPU figures
// of its own (the node's CPU is checked once, node-wide): its cpu fields stay 0.
struct UsageFigures {
  uint64_t memory_capacity = 0;
  uint64_t memory_used = 0;
  uint32_t cpu_millicores_capacity = 0;
  uint32_t cpu_millicores_used = 0;
  uint32_t slots_capacity = 0;
  uint32_t slots_used = 0;
};

// Why a placement was refused; kNone when admitted. `Reason` turns it into the node's words.
struct AdmissionOutcome {
  enum Resource { kNone, kMemory, kCpu, kSlots, kPartitionMemory, kPartitionSlots } refused = kNone;
  uint32_t partition = 0;  // for the partition resources
  double used = 0;         // after the placement
  double capacity = 0;     // as counted for admission (memory times overcommit)
  double threshold = 0;
  [[nodiscard]] bool admitted() const { return refused == kNone; }
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

  // What `request` adds, with the defaults applied. CPU is charged by its request
  // (cpu_request_millicores), else by its limit (cpu_quota_millicores), else the default: a
  // sandbox capped at a core may reserve a tenth of one, so idle sandboxes share the cores.
  [[nodiscard]] uint64_t MemoryOf(const v1::Resources& r) const;
  [[nodiscard]] uint32_t CpuOf(const v1::Resources& r) const;

  // `usage` with `request` added (node totals and the partition), as the agent records it.
  [[nodiscard]] v1::NodeUsage Apply(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const;
  // `usage` with what Apply added for `request` taken back out, never below zero.
  [[nodiscard]] v1::NodeUsage Release(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const;

  // The decision Decide makes, over plain figures: `memory_bytes` and `cpu_millicores` as
  // charged (MemoryOf/CpuOf already applied); `partition` is null when the node lists no
  // partitions, else the requested one (`partition_index` names it in the verdict).
  // Allocates nothing.
  [[nodiscard]] AdmissionOutcome Check(const UsageFigures& node, const UsageFigures* partition,
                                       uint32_t partition_index, uint64_t memory_bytes,
                                       uint32_t cpu_millicores) const;
  // Adds what Check admitted to the node totals and the partition (may be null); Remove takes
  // it back out, never below zero.
  static void Add(UsageFigures& node, UsageFigures* partition, uint64_t memory_bytes, uint32_t cpu_millicores);
  static void Remove(UsageFigures& node, UsageFigures* partition, uint64_t memory_bytes, uint32_t cpu_millicores);
  // The node's words for a refusal: "memory: 29.1 GiB of 32.0 GiB (0.91 > 0.90) after placement".
  [[nodiscard]] static std::string Reason(const AdmissionOutcome& verdict);

  const AdmissionConfig& config() const { return config_; }

 private:
  AdmissionConfig config_;
};

}  // namespace flotilla::admission
