#include "flotilla/admission/admission_limits.h"

#include <cmath>

namespace flotilla::admission {

AdmissionLimits::AdmissionLimits(const AdmissionConfig& config) : config_(config) {}

absl::Status AdmissionLimits::Validate(const AdmissionConfig& config) {
  return AdmissionCheck::Make(config).status();
}

ResourceVector AdmissionLimits::RequestOf(const v1::Resources& r) const {
  // The node's own charge, so the prediction and the node never disagree on it.
  const AdmissionCheck node(config_);
  ResourceVector v;
  v.memory_bytes = node.MemoryOf(r);
  v.cpu_millicores = node.CpuOf(r);
  v.slots = 1;
  return v;
}

ResourceVector AdmissionLimits::Limits(const ResourceVector& capacity) const {
  // The node admits while used/capacity <= threshold (+1e-12): the largest integer usage that
  // satisfies it, computed the same way.
  auto limit = [](double cap, double threshold) {
    return std::floor(cap * threshold + cap * 1e-12);
  };
  ResourceVector lim;
  lim.memory_bytes = static_cast<uint64_t>(
      limit(static_cast<double>(capacity.memory_bytes) * config_.memory_overcommit, config_.memory_warning));
  lim.cpu_millicores = static_cast<uint32_t>(limit(capacity.cpu_millicores, config_.cpu_warning));
  lim.slots = static_cast<uint32_t>(limit(capacity.slots, config_.slots_warning));
  return lim;
}

AdmissionVerdict AdmissionLimits::Check(const ResourceVector& capacity, const ResourceVector& used,
                                        const ResourceVector& request) const {
  return CheckLimits(Limits(capacity), used, request);
}

}  // namespace flotilla::admission
