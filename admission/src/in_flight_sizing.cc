#include "flotilla/admission/in_flight_sizing.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "flotilla/admission/admission_limits.h"

namespace flotilla::admission {

absl::StatusOr<AdmissionConfig> SizeForInFlight(const AdmissionConfig& base, uint32_t in_flight,
                                                uint64_t sandbox_memory_bytes, const ResourceVector& capacity) {
  if (in_flight == 0) return absl::InvalidArgumentError("in_flight: must be at least 1");
  if (capacity.memory_bytes == 0 || capacity.cpu_millicores == 0) {
    return absl::InvalidArgumentError("capacity: the node's memory and cpu_millicores must be positive");
  }
  AdmissionConfig a = base;
  const uint64_t n = uint64_t{in_flight} * kInFlightHeadroom;
  // Slots are the node's own figure: nothing here can raise them.
  const double slot_room = std::floor(static_cast<double>(capacity.slots) * a.slots_warning);
  if (slot_room < static_cast<double>(n)) {
    return absl::InvalidArgumentError(absl::StrCat("slots_capacity: ", capacity.slots, " slots at slots_warning ",
                                                   a.slots_warning, " hold fewer than ", kInFlightHeadroom, " x ",
                                                   in_flight, " sandboxes"));
  }
  // Each sandbox's share of the CPU the node admits, at most a hundredth of a core.
  const double cpu_room = std::floor(static_cast<double>(capacity.cpu_millicores) * a.cpu_warning);
  const uint64_t cpu = std::min<uint64_t>(10, static_cast<uint64_t>(cpu_room) / n);
  if (cpu == 0) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_millicores: ", capacity.cpu_millicores, " at cpu_warning ",
                                                   a.cpu_warning, " give less than 1 millicore to each of ",
                                                   kInFlightHeadroom, " x ", in_flight, " sandboxes"));
  }
  a.default_cpu_millicores = static_cast<uint32_t>(cpu);
  // An eighth of the memory shared out as the default, between 1 MiB and 64 MiB.
  a.default_memory_bytes = std::clamp<uint64_t>(capacity.memory_bytes / 8 / in_flight, 1ull << 20, 64ull << 20);
  const uint64_t charge = sandbox_memory_bytes != 0 ? sandbox_memory_bytes : a.default_memory_bytes;
  // Overcommit (in hundredths, rounded up) until the charges fit under the warning threshold.
  const double need = static_cast<double>(n) * static_cast<double>(charge) /
                      (static_cast<double>(capacity.memory_bytes) * a.memory_warning);
  a.memory_overcommit = std::max(a.memory_overcommit, std::ceil(need * 100.0 + 1e-9) / 100.0);
  if (absl::Status st = AdmissionLimits::Validate(a); !st.ok()) return st;
  return a;
}

}  // namespace flotilla::admission
