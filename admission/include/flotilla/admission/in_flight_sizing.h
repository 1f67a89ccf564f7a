// SizeForInFlight: admission thresholds and default charges under which a node admits a whole
// in-flight bound of small, mostly idle sandboxes (one per RL sample), in the node's own check
// and in the placement engines' prediction of it.
//
// The prediction is not the node's usage: each placement replica adds the usage trend of the
// last two reports (extrapolated up to its trend horizon: at most one more bound while the
// bound fills within a report interval) and its own reservations for creates under way (which
// the node already charged: at most one more bound). So the bound is sized to fit three times
// over. A request that names its memory is charged that, not the default: `sandbox_memory_bytes`
// is that charge (0: the default applies), and memory is overcommitted until it fits.
//
//   AdmissionConfig a = *SizeForInFlight(AdmissionConfig{}, 512, 64 << 20, host_capacity);
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "flotilla/admission/admission_check.h"
#include "flotilla/admission/resource_vector.h"

namespace flotilla::admission {

// How many times over the in-flight bound must fit (see above).
inline constexpr uint32_t kInFlightHeadroom = 3;

// `base` with its default charges and memory overcommit set so that kInFlightHeadroom x
// `in_flight` sandboxes fit a node of `capacity`. InvalidArgument naming the field when they
// cannot (too few slots, or too few CPUs for even one millicore each).
absl::StatusOr<AdmissionConfig> SizeForInFlight(const AdmissionConfig& base, uint32_t in_flight,
                                                uint64_t sandbox_memory_bytes, const ResourceVector& capacity);

}  // namespace flotilla::admission
