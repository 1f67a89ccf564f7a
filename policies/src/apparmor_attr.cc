// Moving the calling process under an AppArmor profile: writes to its attribute files, no
// allocation. Apart from apparmor.cc so that an executable that only does this (the static
// sandbox zygote) links libc and nothing else.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "flotilla/policies/child_enforcement.h"

namespace flotilla::policies {
namespace {

// Writes "<verb> <profile>" to the first of the task's AppArmor attribute files that exists
// (the LSM-specific one of newer kernels, then the shared one). Async-signal-safe.
int WriteAppArmorAttr(const char* const paths[2], const char* verb, const char* profile_name) noexcept {
  char cmd[256];
  size_t vlen = std::strlen(verb), len = std::strlen(profile_name);
  if (len == 0 || vlen + len + 2 > sizeof(cmd)) return EINVAL;
  std::memcpy(cmd, verb, vlen);
  cmd[vlen] = ' ';
  std::memcpy(cmd + vlen + 1, profile_name, len + 1);
  const size_t total = vlen + 1 + len;
  int err = ENOENT;
  for (int i = 0; i < 2; ++i) {
    int fd = open(paths[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      err = errno;
      continue;
    }
    ssize_t n = write(fd, cmd, total);
    err = n == static_cast<ssize_t>(total) ? 0 : errno;
    close(fd);
    return err;
  }
  return err;
}

}  // namespace

int ChangeAppArmorProfileOnExec(const char* profile_name) noexcept {
  static const char* const kPaths[2] = {"/proc/self/attr/apparmor/exec", "/proc/self/attr/exec"};
  return WriteAppArmorAttr(kPaths, "exec", profile_name);
}

int ChangeAppArmorProfileNow(const char* profile_name) noexcept {
  static const char* const kPaths[2] = {"/proc/self/attr/apparmor/current", "/proc/self/attr/current"};
  return WriteAppArmorAttr(kPaths, "changeprofile", profile_name);
}

}  // namespace flotilla::policies
