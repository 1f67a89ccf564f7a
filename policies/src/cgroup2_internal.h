// Private helpers for cgroup v2 directories.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace flotilla::policies {

// The kernel's 64-bit id of a cgroup v2 directory (what bpf_get_current_cgroup_id() returns for
// tasks in it). InvalidArgument when the fd is not a cgroup v2 directory.
absl::StatusOr<uint64_t> Cgroup2Id(int cgroup_dir_fd);

}  // namespace flotilla::policies
