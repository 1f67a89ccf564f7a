#include "flotilla/sandbox/admission.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flotilla::sandbox {
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

v1::AdmitResponse AdmissionCheck::Decide(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const {
  v1::AdmitResponse out;
  *out.mutable_usage() = usage;
  const uint64_t mem = MemoryOf(request.resources());
  const uint32_t cpu = CpuOf(request.resources());
  auto over = [&](const std::string& what, double used, double cap, double threshold, bool bytes) {
    if (cap <= 0) {
      out.set_reason(absl::StrCat(what, ": no capacity"));
      return true;
    }
    double ratio = used / cap;
    if (ratio <= threshold + 1e-12) return false;
    out.set_reason(bytes ? absl::StrFormat("%s: %s of %s (%.2f > %.2f) after placement", what, Gib(used), Gib(cap),
                                           ratio, threshold)
                         : absl::StrFormat("%s: %.0f of %.0f (%.2f > %.2f) after placement", what, used, cap, ratio,
                                           threshold));
    return true;
  };
  const double oc = config_.memory_overcommit;
  if (over("memory", double(usage.memory_used() + mem), double(usage.memory_capacity()) * oc, config_.memory_warning,
           true) ||
      over("cpu_millicores", double(usage.cpu_millicores_used() + cpu), double(usage.cpu_millicores_capacity()),
           config_.cpu_warning, false) ||
      over("slots", double(usage.slots_used() + 1), double(usage.slots_capacity()), config_.slots_warning, false)) {
    return out;
  }
  if (usage.partitions_size() > 0) {
    const v1::NumaPartition* part = nullptr;
    for (const auto& p : usage.partitions()) {
      if (p.index() == request.numa_partition()) part = &p;
    }
    if (part == nullptr) {
      out.set_reason(absl::StrCat("numa_partition: no partition ", request.numa_partition(), " on this node"));
      return out;
    }
    std::string name = absl::StrCat("partition ", part->index(), " memory");
    if (over(name, double(part->memory_used() + mem), double(part->memory_capacity()) * oc, config_.memory_warning,
             true) ||
        over(absl::StrCat("partition ", part->index(), " slots"), double(part->slots_used() + 1),
             double(part->slots_capacity()), config_.slots_warning, false)) {
      return out;
    }
  }
  out.set_admitted(true);
  return out;
}

v1::NodeUsage AdmissionCheck::Apply(const v1::NodeUsage& usage, const v1::AdmitRequest& request) const {
  v1::NodeUsage u = usage;
  const uint64_t mem = MemoryOf(request.resources());
  u.set_memory_used(u.memory_used() + mem);
  u.set_cpu_millicores_used(u.cpu_millicores_used() + CpuOf(request.resources()));
  u.set_slots_used(u.slots_used() + 1);
  for (auto& p : *u.mutable_partitions()) {
    if (p.index() == request.numa_partition()) {
      p.set_memory_used(p.memory_used() + mem);
      p.set_slots_used(p.slots_used() + 1);
    }
  }
  return u;
}

}  // namespace flotilla::sandbox
