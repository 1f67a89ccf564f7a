#include "flotilla/admission/admission_check.h"

#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flotilla::admission {
namespace {

std::string Gib(double bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30)); }

}  // namespace

AdmissionCheck::AdmissionCheck(AdmissionConfig config) : config_(config) {}

absl::StatusOr<AdmissionCheck> AdmissionCheck::Make(AdmissionConfig config) {
  auto bad = [](const char* field, double v) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: must be in (0, 1], got %g", field, v));
  };
  if (!(config.memory_warning > 0 && config.memory_warning <= 1)) return bad("memory_warning", config.memory_warning);
  if (!(config.cpu_warning > 0 && config.cpu_warning <= 1)) return bad("cpu_warning", config.cpu_warning);
  if (!(config.slots_warning > 0 && config.slots_warning <= 1)) return bad("slots_warning", config.slots_warning);
  if (!(config.memory_overcommit >= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("memory_overcommit: must be >= 1, got %g", config.memory_overcommit));
  }
  return AdmissionCheck(config);
}

uint64_t AdmissionCheck::MemoryOf(const v1::Resources& r) const {
  return r.memory_bytes() ? r.memory_bytes() : config_.default_memory_bytes;
}

uint32_t AdmissionCheck::CpuOf(const v1::Resources& r) const {
  return r.cpu_quota_millicores() ? r.cpu_quota_millicores() : config_.default_cpu_millicores;
}

AdmissionOutcome AdmissionCheck::Check(const UsageFigures& node, const UsageFigures* partition,
                                       uint32_t partition_index, uint64_t memory_bytes,
                                       uint32_t cpu_millicores) const {
  AdmissionOutcome out;
  // Refused when nothing can hold the request, used/capacity passes the threshold, or the sum
  // would not fit the 64-bit figure it is recorded in (a usage reported near 2^64).
  auto over = [&out](AdmissionOutcome::Resource what, double used, double cap, double threshold,
                     bool wraps = false) {
    if (!wraps && cap > 0 && used / cap <= threshold + 1e-12) return false;
    out.refused = what;
    out.used = used;
    out.capacity = cap;
    out.threshold = threshold;
    return true;
  };
  auto wraps = [memory_bytes](uint64_t used) { return memory_bytes > std::numeric_limits<uint64_t>::max() - used; };
  const double oc = config_.memory_overcommit;
  if (over(AdmissionOutcome::kMemory, double(node.memory_used) + double(memory_bytes),
           double(node.memory_capacity) * oc, config_.memory_warning, wraps(node.memory_used)) ||
      over(AdmissionOutcome::kCpu, double(node.cpu_millicores_used) + cpu_millicores,
           double(node.cpu_millicores_capacity), config_.cpu_warning) ||
      over(AdmissionOutcome::kSlots, double(node.slots_used) + 1, double(node.slots_capacity),
           config_.slots_warning)) {
    return out;
  }
  if (partition != nullptr) {
    out.partition = partition_index;
    if (over(AdmissionOutcome::kPartitionMemory, double(partition->memory_used) + double(memory_bytes),
             double(partition->memory_capacity) * oc, config_.memory_warning, wraps(partition->memory_used)) ||
        over(AdmissionOutcome::kPartitionSlots, double(partition->slots_used) + 1,
             double(partition->slots_capacity), config_.slots_warning)) {
      return out;
    }
  }
  return out;
}

void AdmissionCheck::Add(UsageFigures& node, UsageFigures* partition, uint64_t memory_bytes,
                         uint32_t cpu_millicores) {
  node.memory_used += memory_bytes;
  node.cpu_millicores_used += cpu_millicores;
  node.slots_used += 1;
  if (partition != nullptr) {
    partition->memory_used += memory_bytes;
    partition->slots_used += 1;
  }
}

void AdmissionCheck::Remove(UsageFigures& node, UsageFigures* partition, uint64_t memory_bytes,
                            uint32_t cpu_millicores) {
  auto sub = [](auto a, auto b) -> decltype(a) { return a > b ? a - b : 0; };
  node.memory_used = sub(node.memory_used, memory_bytes);
  node.cpu_millicores_used = sub(node.cpu_millicores_used, cpu_millicores);
  node.slots_used = sub(node.slots_used, 1u);
  if (partition != nullptr) {
    partition->memory_used = sub(partition->memory_used, memory_bytes);
    partition->slots_used = sub(partition->slots_used, 1u);
  }
}

std::string AdmissionCheck::Reason(const AdmissionOutcome& v) {
  std::string what;
  bool bytes = false;
  switch (v.refused) {
    case AdmissionOutcome::kNone:
      return "";
    case AdmissionOutcome::kMemory:
      what = "memory";
      bytes = true;
      break;
    case AdmissionOutcome::kCpu:
      what = "cpu_millicores";
      break;
    case AdmissionOutcome::kSlots:
      what = "slots";
      break;
    case AdmissionOutcome::kPartitionMemory:
      what = absl::StrCat("partition ", v.partition, " memory");
      bytes = true;
      break;
    case AdmissionOutcome::kPartitionSlots:
      what = absl::StrCat("partition ", v.partition, " slots");
      break;
  }
  if (v.capacity <= 0) return absl::StrCat(what, ": no capacity");
  const double ratio = v.used / v.capacity;
  return bytes ? absl::StrFormat("%s: %s of %s (%.2f > %.2f) after placement", what, Gib(v.used), Gib(v.capacity),
                                 ratio, v.threshold)
               : absl::StrFormat("%s: %.0f of %.0f (%.2f > %.2f) after placement", what, v.used, v.capacity, ratio,
                                 v.threshold);
}

namespace {

UsageFigures NodeFigures(const v1::NodeUsage& u) {
  return {u.memory_capacity(), u.memory_used(), u.cpu_millicores_capacity(), u.cpu_millicores_used(),
          u.slots_capacity(), u.slots_used()};
}

UsageFigures PartitionFigures(const v1::NumaPartition& p) {
  return {p.memory_capacity(), p.memory_used(), 0, 0, p.slots_capacity(), p.slots_used()};
}

}  // namespace

v1::AdmitResponse AdmissionCheck::Decide(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const {
  v1::AdmitResponse out;
  *out.mutable_usage() = usage;
  const v1::NumaPartition* part = nullptr;
  if (usage.partitions_size() > 0) {
    for (const auto& p : usage.partitions()) {
      if (p.index() == request.numa_partition()) part = &p;
    }
  }
  UsageFigures part_figures;
  if (part != nullptr) part_figures = PartitionFigures(*part);
  const uint64_t mem = MemoryOf(request.resources());
  const uint32_t cpu = CpuOf(request.resources());
  // The node-wide figures are checked first, so a missing partition is named only when the
  // node as a whole has room.
  AdmissionOutcome v = Check(NodeFigures(usage), nullptr, 0, mem, cpu);
  if (v.admitted() && usage.partitions_size() > 0) {
    if (part == nullptr) {
      out.set_reason(absl::StrCat("numa_partition: no partition ", request.numa_partition(), " on this node"));
      return out;
    }
    v = Check(NodeFigures(usage), &part_figures, part->index(), mem, cpu);
  }
  if (!v.admitted()) {
    out.set_reason(Reason(v));
    return out;
  }
  out.set_admitted(true);
  return out;
}

namespace {

// Adds (or removes) `request`'s charge in `u`'s node totals and its partition, through the
// plain-figure Add/Remove so both directions share one piece of arithmetic.
v1::NodeUsage Charge(const AdmissionCheck& check, const v1::NodeUsage& usage, const v1::AdmitRequest& request,
                     bool add) {
  v1::NodeUsage u = usage;
  const uint64_t mem = check.MemoryOf(request.resources());
  const uint32_t cpu = check.CpuOf(request.resources());
  UsageFigures node = NodeFigures(u);
  v1::NumaPartition* part = nullptr;
  for (auto& p : *u.mutable_partitions()) {
    if (p.index() == request.numa_partition()) part = &p;
  }
  UsageFigures part_figures;
  if (part != nullptr) part_figures = PartitionFigures(*part);
  if (add) {
    AdmissionCheck::Add(node, part != nullptr ? &part_figures : nullptr, mem, cpu);
  } else {
    AdmissionCheck::Remove(node, part != nullptr ? &part_figures : nullptr, mem, cpu);
  }
  u.set_memory_used(node.memory_used);
  u.set_cpu_millicores_used(node.cpu_millicores_used);
  u.set_slots_used(node.slots_used);
  if (part != nullptr) {
    part->set_memory_used(part_figures.memory_used);
    part->set_slots_used(part_figures.slots_used);
  }
  return u;
}

}  // namespace

v1::NodeUsage AdmissionCheck::Apply(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const {
  return Charge(*this, usage, request, /*add=*/true);
}

v1::NodeUsage AdmissionCheck::Release(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const {
  return Charge(*this, usage, request, /*add=*/false);
}

}  // namespace flotilla::admission
