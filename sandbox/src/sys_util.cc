#include "sys_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {

absl::Status WriteSmallFile(const std::string& path, std::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoStatus("write '" + std::string(value) + "' to " + path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open " + path);
  std::string out;
  char buf[8192];
  while (out.size() < (1u << 20)) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::Status WriteNewFile(const std::string& path, std::string_view content, int mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return ErrnoStatus("create " + path);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path);
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) return ErrnoStatus("chmod " + path);
  return absl::OkStatus();
}

uint64_t KeyedValue(std::string_view text, std::string_view key) {
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    if (line.size() > key.size() && std::string_view(line.data(), key.size()) == key && line[key.size()] == ' ') {
      uint64_t v = 0;
      if (absl::SimpleAtoi(std::string(line.substr(key.size() + 1)), &v)) return v;
    }
  }
  return 0;
}

namespace {

// Removes the contents of `dirfd` (on device `dev`); never descends into another filesystem.
void RemoveContents(int dirfd, dev_t dev, int depth) {
  if (depth > 256) return;
  int dup = ::dup(dirfd);
  if (dup < 0) return;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    struct stat st;
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev) continue;  // a mount point: leave it alone
      UniqueFd sub(::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) RemoveContents(sub.get(), dev, depth + 1);
      ::unlinkat(dirfd, n.c_str(), AT_REMOVEDIR);
    } else {
      ::unlinkat(dirfd, n.c_str(), 0);
    }
  }
}

}  // namespace

void RemoveTree(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    ::unlink(path.c_str());
    return;
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return;
  RemoveContents(fd.get(), st.st_dev, 0);
  fd.Reset();
  ::rmdir(path.c_str());
}

std::vector<MountEntry> Mounts() {
  std::vector<MountEntry> out;
  auto info = ReadSmallFile("/proc/self/mountinfo");
  if (!info.ok()) return out;
  // "36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate"
  for (absl::string_view line : absl::StrSplit(*info, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 3 >= f.size()) continue;
    out.push_back(MountEntry{std::string(f[4]), std::string(f[dash + 1]), std::string(f[dash + 3])});
  }
  return out;
}

}  // namespace flotilla::sandbox
