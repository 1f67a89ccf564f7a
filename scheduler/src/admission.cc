#include "flotilla/scheduler/admission.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {
namespace {

std::string Gib(uint64_t bytes) {
  return absl::StrFormat("%.2fGiB", static_cast<double>(bytes) / static_cast<double>(1ull << 30));
}

}  // namespace

absl::StatusOr<AdmissionPolicy> AdmissionPolicy::FromConfig(const ConfigNode& node) {
  AdmissionPolicy p;
  if (!node.present()) return p;
  RETURN_IF_ERROR(node.CheckKeys(
      {"memory_warning", "cpu_warning", "slots_warning", "memory_overcommit", "cpu_overcommit"}));
  ASSIGN_OR_RETURN(p.memory_warning, node["memory_warning"].AsDouble(p.memory_warning));
  ASSIGN_OR_RETURN(p.cpu_warning, node["cpu_warning"].AsDouble(p.cpu_warning));
  ASSIGN_OR_RETURN(p.slots_warning, node["slots_warning"].AsDouble(p.slots_warning));
  ASSIGN_OR_RETURN(p.memory_overcommit, node["memory_overcommit"].AsDouble(p.memory_overcommit));
  ASSIGN_OR_RETURN(p.cpu_overcommit, node["cpu_overcommit"].AsDouble(p.cpu_overcommit));
  absl::Status s = p.Validate();
  if (!s.ok()) return node.Error(std::string(s.message()));
  return p;
}

absl::Status AdmissionPolicy::Validate() const {
  auto frac = [](const char* name, double v) -> absl::Status {
    if (!(v > 0.0 && v <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": must be in (0, 1], got ", v));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(frac("memory_warning", memory_warning));
  RETURN_IF_ERROR(frac("cpu_warning", cpu_warning));
  RETURN_IF_ERROR(frac("slots_warning", slots_warning));
  if (!(memory_overcommit >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("memory_overcommit: must be >= 1, got ", memory_overcommit));
  }
  if (!(cpu_overcommit >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_overcommit: must be >= 1, got ", cpu_overcommit));
  }
  return absl::OkStatus();
}

AdmissionCheck::AdmissionCheck(const AdmissionPolicy& policy) : policy_(policy) {}

ResourceVector AdmissionCheck::Limits(const ResourceVector& capacity) const {
  ResourceVector lim;
  lim.memory_bytes = static_cast<uint64_t>(std::floor(static_cast<double>(capacity.memory_bytes) *
                                                      policy_.memory_overcommit * policy_.memory_warning));
  lim.cpu_millicores = static_cast<uint32_t>(std::floor(static_cast<double>(capacity.cpu_millicores) *
                                                        policy_.cpu_overcommit * policy_.cpu_warning));
  lim.slots = static_cast<uint32_t>(std::floor(static_cast<double>(capacity.slots) * policy_.slots_warning));
  return lim;
}

AdmissionVerdict AdmissionCheck::Check(const ResourceVector& capacity, const ResourceVector& used,
                                       const ResourceVector& request) const {
  return CheckLimits(Limits(capacity), used, request);
}

AdmissionVerdict AdmissionCheck::CheckLimits(const ResourceVector& lim, const ResourceVector& used,
                                             const ResourceVector& request) {
  ResourceVector after = used;
  after += request;
  if (after.slots > lim.slots) return AdmissionVerdict::kSlots;
  if (after.memory_bytes > lim.memory_bytes) return AdmissionVerdict::kMemory;
  if (request.cpu_millicores != 0 && after.cpu_millicores > lim.cpu_millicores) return AdmissionVerdict::kCpu;
  return AdmissionVerdict::kAdmitted;
}

AdmissionDecision AdmissionCheck::Decide(const PartitionUsage& partition, const ResourceVector& request) const {
  AdmissionDecision d;
  d.verdict = Check(partition.capacity, partition.used, request);
  d.admitted = d.verdict == AdmissionVerdict::kAdmitted;
  if (d.admitted) return d;
  ResourceVector after = partition.used;
  after += request;
  ResourceVector lim = Limits(partition.capacity);
  switch (d.verdict) {
    case AdmissionVerdict::kSlots:
      d.reason = absl::StrCat("slots: ", after.slots, " would exceed the warning limit of ", lim.slots,
                              " in partition ", partition.index);
      break;
    case AdmissionVerdict::kMemory:
      d.reason = absl::StrCat("memory: ", Gib(after.memory_bytes), " would exceed the warning limit of ",
                              Gib(lim.memory_bytes), " in partition ", partition.index);
      break;
    case AdmissionVerdict::kCpu:
      d.reason = absl::StrCat("cpu: ", after.cpu_millicores, "m would exceed the warning limit of ",
                              lim.cpu_millicores, "m in partition ", partition.index);
      break;
    default:
      d.reason = absl::StrCat("no partition ", partition.index);
  }
  return d;
}

}  // namespace flotilla::scheduler
