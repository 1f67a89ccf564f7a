// FavorCgroupMigrations: the "favordynmods" option of the cgroup v2 superblock.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_split.h"
#include "cgroups.h"
#include "flotilla/common/status.h"
#include "sys_util.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {
namespace {

constexpr char kOption[] = "favordynmods";

// The superblock options of the cgroup2 mount at `mount_point` ("rw,nsdelegate,...").
absl::StatusOr<std::vector<std::string>> SuperOptions(const std::string& mount_point) {
  for (const MountEntry& m : Mounts()) {
    if (m.mount_point == mount_point && m.fstype == "cgroup2") {
      return std::vector<std::string>(absl::StrSplit(m.super_options, ','));
    }
  }
  return absl::NotFoundError("no cgroup2 mount at " + mount_point);
}

}  // namespace

absl::StatusOr<bool> FavorCgroupMigrations(const std::string& v2_mount) {
  ASSIGN_OR_RETURN(std::vector<std::string> options, SuperOptions(v2_mount));
  for (const std::string& o : options) {
    if (o == kOption) return true;
  }
  // A reconfiguration sets the superblock's flags to exactly the ones given: give the current
  // ones again, plus ours.
  UniqueFd fs(::fspick(AT_FDCWD, v2_mount.c_str(), FSPICK_CLOEXEC));
  if (!fs.valid()) return ErrnoStatus("fspick " + v2_mount);
  options.push_back(kOption);
  for (const std::string& o : options) {
    if (o == "rw" || o == "ro") continue;
    if (::fsconfig(fs.get(), FSCONFIG_SET_FLAG, o.c_str(), nullptr, 0) != 0) {
      if (o == kOption && errno == EINVAL) return false;  // a kernel before 6.0
      return ErrnoStatus("cgroup2 option " + o);
    }
  }
  if (::fsconfig(fs.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) {
    return ErrnoStatus("reconfiguring the cgroup2 superblock at " + v2_mount);
  }
  return true;
}

}  // namespace flotilla::sandbox
