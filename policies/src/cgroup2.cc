// Finding the cgroup v2 hierarchy and naming a cgroup v2 directory by its id.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "cgroup2_internal.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/network.h"

namespace flotilla::policies {

absl::StatusOr<std::string> FindCgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return ErrnoStatus("reading /proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "36 25 0:31 / /sys/fs/cgroup/unified rw,... shared:9 - cgroup2 cgroup2 rw,..."
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> after = absl::StrSplit(line.substr(dash + 3), ' ');
    if (after.empty() || after[0] != "cgroup2") continue;
    std::vector<std::string> before = absl::StrSplit(line.substr(0, dash), ' ');
    if (before.size() < 5) continue;
    return before[4];
  }
  return absl::NotFoundError("no cgroup v2 hierarchy is mounted (see /proc/self/mountinfo)");
}

absl::StatusOr<uint64_t> Cgroup2Id(int cgroup_dir_fd) {
  struct statfs sfs {};
  if (fstatfs(cgroup_dir_fd, &sfs) != 0) return ErrnoStatus("fstatfs on the cgroup directory");
  if (sfs.f_type != CGROUP2_SUPER_MAGIC) {
    return absl::InvalidArgumentError("not a cgroup v2 directory (attach under FindCgroup2Mount())");
  }
  alignas(file_handle) char buf[sizeof(file_handle) + sizeof(uint64_t)] = {};
  auto* handle = reinterpret_cast<file_handle*>(buf);
  handle->handle_bytes = sizeof(uint64_t);
  int mount_id = 0;
  if (name_to_handle_at(cgroup_dir_fd, "", handle, &mount_id, AT_EMPTY_PATH) != 0) {
    return ErrnoStatus("name_to_handle_at on the cgroup directory");
  }
  uint64_t id;
  std::memcpy(&id, buf + sizeof(file_handle), sizeof(id));
  return id;
}

}  // namespace flotilla::policies
