// The runtime's shared user namespace: root inside maps to host uid/gid `base` (65536 ids).
// Sandboxes' inits enter it with setns after their mounts are done; id-mapped layer mounts use
// it too. Owning the fd keeps the namespace alive.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {

absl::StatusOr<UniqueFd> CreateUserNamespace(uint32_t base);

}  // namespace flotilla::sandbox
