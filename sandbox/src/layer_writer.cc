#include "layer_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {
namespace {

constexpr const char* kOpaque = "trusted.overlay.opaque";

uint32_t Shift(uint32_t id, uint32_t base) { return id >= base && id < base + 65536 ? id - base : 65534; }

}  // namespace

LayerWriter::LayerWriter(uint32_t uid_base) : uid_base_(uid_base), ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

LayerWriter::~LayerWriter() { EVP_MD_CTX_free(ctx_); }

void LayerWriter::AddText(const std::string& s) { EVP_DigestUpdate(ctx_, s.data(), s.size()); }

std::string LayerWriter::Finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, md, &n);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

absl::Status LayerWriter::CopyTree(int src_fd, const std::string& dst, const std::string& tag) {
  if (::mkdir(dst.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + dst);
  UniqueFd d(::open(dst.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) return ErrnoStatus("open " + dst);
  struct stat st;
  if (::fstat(src_fd, &st) == 0) {
    ::fchown(d.get(), Shift(st.st_uid, uid_base_), Shift(st.st_gid, uid_base_));
    ::fchmod(d.get(), st.st_mode & 07777);
  }
  AddText("tree " + tag + "\n");
  return CopyDir(src_fd, d.get(), "", 0);
}

absl::Status LayerWriter::CopyDir(int src_fd, int dst_fd, const std::string& rel, int depth) {
  if (depth > 512) return absl::FailedPreconditionError("layer deeper than 512 directories at " + rel);
  UniqueFd dup(::dup(src_fd));
  DIR* dir = ::fdopendir(dup.Release());
  if (dir == nullptr) return ErrnoStatus("read dir " + rel);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) RETURN_IF_ERROR(CopyEntry(src_fd, dst_fd, n, rel + "/" + n, depth));
  return absl::OkStatus();
}

absl::Status LayerWriter::CopyEntry(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                                    int depth) {
  struct stat st;
  if (::fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return ErrnoStatus("stat " + rel);
  uint32_t uid = Shift(st.st_uid, uid_base_), gid = Shift(st.st_gid, uid_base_);
  uint32_t mode = st.st_mode & 07777;
  const char* cname = name.c_str();
  if (S_ISDIR(st.st_mode)) {
    UniqueFd src(::openat(src_dir, cname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!src.valid()) return ErrnoStatus("open " + rel);
    char v[4] = {};
    bool opaque = ::fgetxattr(src.get(), kOpaque, v, sizeof(v)) > 0 && v[0] == 'y';
    AddText(absl::StrCat("D ", rel, " ", mode, " ", uid, " ", gid, opaque ? " opaque" : "", "\n"));
    if (::mkdirat(dst_dir, cname, 0700) != 0) return ErrnoStatus("mkdir " + rel);
    UniqueFd dst(::openat(dst_dir, cname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dst.valid()) return ErrnoStatus("open " + rel);
    if (opaque) ::fsetxattr(dst.get(), kOpaque, "y", 1, 0);
    RETURN_IF_ERROR(CopyDir(src.get(), dst.get(), rel, depth + 1));
    ::fchown(dst.get(), uid, gid);
    ::fchmod(dst.get(), mode);
    return absl::OkStatus();
  }
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlinkat(src_dir, cname, target, sizeof(target) - 1);
    if (n < 0) return ErrnoStatus("readlink " + rel);
    target[n] = '\0';
    AddText(absl::StrCat("L ", rel, " ", uid, " ", gid, " ", target, "\n"));
    if (::symlinkat(target, dst_dir, cname) != 0) return ErrnoStatus("symlink " + rel);
    ::fchownat(dst_dir, cname, uid, gid, AT_SYMLINK_NOFOLLOW);
    return absl::OkStatus();
  }
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {  // an overlay whiteout
    AddText(absl::StrCat("W ", rel, "\n"));
    if (::mknodat(dst_dir, cname, S_IFCHR | 0, makedev(0, 0)) != 0) return ErrnoStatus("whiteout " + rel);
    return absl::OkStatus();
  }
  if (!S_ISREG(st.st_mode)) {
    // Devices, fifos and sockets are not carried into layers.
    AddText(absl::StrCat("S ", rel, "\n"));
    return absl::OkStatus();
  }
  // Setuid/setgid bits are dropped: every sandbox mount is nosuid, so they grant nothing inside,
  // while on the host a layer file owned by (inside) root is owned by host root.
  mode &= ~static_cast<uint32_t>(S_ISUID | S_ISGID);
  UniqueFd src(::openat(src_dir, cname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!src.valid()) return ErrnoStatus("open " + rel);
  UniqueFd dst(::openat(dst_dir, cname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!dst.valid()) return ErrnoStatus("create " + rel);
  AddText(absl::StrCat("F ", rel, " ", mode, " ", uid, " ", gid, " ", st.st_size, "\n"));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(src.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + rel);
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx_, buf, static_cast<size_t>(n));
    if (::write(dst.get(), buf, static_cast<size_t>(n)) != n) return ErrnoStatus("write " + rel);
    bytes_ += static_cast<uint64_t>(n);
  }
  ::fchown(dst.get(), uid, gid);
  ::fchmod(dst.get(), mode);
  return absl::OkStatus();
}

}  // namespace flotilla::sandbox
