// Small file helpers over raw syscalls, used for cgroup, proc and sysfs files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::sandbox {

// Writes `value` to an existing file (no O_CREAT, no truncation semantics beyond the kernel's).
absl::Status WriteSmallFile(const std::string& path, std::string_view value);
// Reads a whole small file (up to 1 MiB).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);
// Creates or replaces a regular file with `content` and `mode`.
absl::Status WriteNewFile(const std::string& path, std::string_view content, int mode = 0644);
// The value after "key " in a "key value" per-line file (memory.events, oom_control), or 0.
uint64_t KeyedValue(std::string_view text, std::string_view key);
// One line of /proc/self/mountinfo: where, what filesystem, and its superblock options.
struct MountEntry {
  std::string mount_point;
  std::string fstype;
  std::string super_options;  // "rw,nsdelegate,..."
};
// The mounts of this process's mount namespace, in the kernel's order; empty when unreadable.
std::vector<MountEntry> Mounts();
// Removes a directory tree without following symlinks or crossing into mounts; best effort.
void RemoveTree(const std::string& path);

}  // namespace flotilla::sandbox
