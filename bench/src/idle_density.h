// The idle-density figure: how many idle sandboxes one node holds at once, and what each
// costs the host in memory. Creates sandboxes until `target` or the first failure, measures,
// then destroys them all.
#pragma once

#include "absl/status/status.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::bench {

struct IdleDensity {
  int count = 0;                    // sandboxes alive at once
  std::string stopped_by;           // the failure that ended creation; empty at the target
  double create_s = 0;              // wall time to create them all
  double host_kib_per_sandbox = 0;  // MemAvailable drop / count
  double cgroup_kib_per_sandbox = 0;  // mean memory charged to each sandbox's cgroup
  double destroy_s = 0;
};

// Fails only when no sandbox at all could be created or when
// destroying them fails.
absl::StatusOr<IdleDensity> MeasureIdleDensity(sandbox::Runtime& runtime, int target);

}  // namespace flotilla::bench
