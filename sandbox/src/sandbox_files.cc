// Runtime::PutFile / GetFile: paths resolved inside the sandbox root with openat2
// (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so symlinks and ".." never leave it; only files on
// the sandbox's own layers (overlayfs, tmpfs) are read or written, never /proc or devices.
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "runtime_impl.h"

namespace flotilla::sandbox {
namespace {

int OpenInRoot(int root, const std::string& path, uint64_t flags, uint64_t mode) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
}

absl::Status CheckPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return absl::InvalidArgumentError("path: must be absolute, got '" + path + "'");
  if (path.find('\0') != std::string::npos) return absl::InvalidArgumentError("path: NUL byte");
  if (path.size() > 4096) return absl::InvalidArgumentError("path: longer than 4096 bytes");
  return absl::OkStatus();
}

// Only the sandbox's own files: its overlay layers or tmpfs mounts.
absl::Status CheckOwnFilesystem(int fd, const std::string& path) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return ErrnoStatus("statfs " + path);
  if (fs.f_type != OVERLAYFS_SUPER_MAGIC && fs.f_type != TMPFS_MAGIC) {
    return absl::PermissionDeniedError("path: " + path + " is not on the sandbox's own filesystem");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError("path: " + path + " is not a regular file");
  return absl::OkStatus();
}

}  // namespace

absl::Status RuntimeImpl::PutFile(const std::string& id, const std::string& path, std::string_view content,
                                  uint32_t mode) {
  RETURN_IF_ERROR(CheckPath(path));
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  UniqueFd root(sb->OpenRoot());
  if (!root.valid()) return absl::FailedPreconditionError("sandbox '" + id + "' is not running");
  const uint32_t base = options_.host_uid_base;
  // Parents first, each created (owned by root inside) when missing.
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.empty()) return absl::InvalidArgumentError("path: names no file");
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string parent = prefix.empty() ? "/" : prefix;
    prefix += "/" + parts[i];
    UniqueFd dir(OpenInRoot(root.get(), prefix, O_PATH | O_DIRECTORY, 0));
    if (dir.valid()) continue;
    if (errno != ENOENT) return ErrnoStatus("path: " + prefix);
    UniqueFd pfd(OpenInRoot(root.get(), parent, O_RDONLY | O_DIRECTORY, 0));
    if (!pfd.valid()) return ErrnoStatus("path: " + parent);
    if (::mkdirat(pfd.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + prefix);
    ::fchownat(pfd.get(), parts[i].c_str(), base, base, AT_SYMLINK_NOFOLLOW);
  }
  UniqueFd fd(OpenInRoot(root.get(), path, O_WRONLY | O_CREAT | O_NOCTTY | O_NONBLOCK, mode & 07777));
  if (!fd.valid() && errno == EROFS) return absl::PermissionDeniedError("path: " + path + " is read-only");
  if (!fd.valid()) return ErrnoStatus("open " + path);
  RETURN_IF_ERROR(CheckOwnFilesystem(fd.get(), path));
  if (::ftruncate(fd.get(), 0) != 0) return ErrnoStatus("truncate " + path);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path);
    }
    off += static_cast<size_t>(n);
  }
  if (::fchown(fd.get(), base, base) != 0) return ErrnoStatus("chown " + path);
  if (::fchmod(fd.get(), mode & 07777) != 0) return ErrnoStatus("chmod " + path);
  return absl::OkStatus();
}

absl::StatusOr<FileContent> RuntimeImpl::GetFile(const std::string& id, const std::string& path, uint64_t max_bytes) {
  RETURN_IF_ERROR(CheckPath(path));
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  UniqueFd root(sb->OpenRoot());
  if (!root.valid()) return absl::FailedPreconditionError("sandbox '" + id + "' is not running");
  if (max_bytes == 0) max_bytes = 64ull << 20;
  UniqueFd fd(OpenInRoot(root.get(), path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("open " + path);
  RETURN_IF_ERROR(CheckOwnFilesystem(fd.get(), path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::OutOfRangeError(absl::StrCat("path: ", path, " has ", st.st_size, " bytes, more than max_bytes ", max_bytes));
  }
  FileContent out;
  out.mode = st.st_mode & 07777;
  out.content.resize(static_cast<size_t>(st.st_size));
  size_t off = 0;
  while (off < out.content.size()) {
    ssize_t n = ::read(fd.get(), out.content.data() + off, out.content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path);
    if (n == 0) break;
    off += static_cast<size_t>(n);
  }
  out.content.resize(off);
  return out;
}

}  // namespace flotilla::sandbox
