#include "image_store.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "layer_writer.h"
#include "sys_util.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "bin:x:2:2:bin:/bin:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
constexpr const char* kGroup =
    "root:x:0:\ndaemon:x:1:\nbin:x:2:\ntty:x:5:\nusers:x:100:\nnogroup:x:65534:\n";
constexpr const char* kHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
constexpr const char* kNsswitch =
    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
    "protocols: files\nservices: files\nethers: files\nrpc: files\n";

bool IsHexId(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageStore>> ImageStore::Open(const std::string& state_dir, int userns_fd,
                                                             uint32_t uid_base) {
  std::unique_ptr<ImageStore> s(new ImageStore());
  s->state_dir_ = state_dir;
  s->userns_fd_ = userns_fd;
  s->uid_base_ = uid_base;
  std::error_code ec;
  fs::create_directories(state_dir + "/layers", ec);
  fs::create_directories(state_dir + "/images", ec);
  if (ec) return absl::InternalError("creating " + state_dir + ": " + ec.message());
  fs::create_directories(state_dir + "/base", ec);
  // Layers hold files owned by host root (root inside): only root may reach them.
  for (const char* d : {"/layers", "/images", "/base", "/run"}) ::chmod((state_dir + d).c_str(), 0700);
  RETURN_IF_ERROR(s->BuildSkeleton());
  return s;
}

ImageStore::~ImageStore() = default;

absl::Status ImageStore::BuildSkeleton() {
  // Shared by every runtime on this state dir and rebuilt only when its inputs change.
  std::string inputs = "skeleton-v1";
  for (const char* f : {"/etc/ld.so.cache", "/etc/ssl/certs/ca-certificates.crt", "/etc/alternatives", "/etc/resolv.conf",
                        "/usr"}) {
    struct stat st {};
    ::stat(f, &st);
    absl::StrAppend(&inputs, ":", st.st_ino, ".", st.st_size, ".", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  }
  skeleton_ = absl::StrCat(state_dir_, "/base/skeleton-", absl::Hex(std::hash<std::string>()(inputs)));
  std::error_code ec;
  if (fs::is_directory(skeleton_ + "/etc", ec)) return absl::OkStatus();
  fs::create_directories(state_dir_ + "/base", ec);
  const std::string sk = state_dir_ + "/base/.tmp-" + NewId("sk");
  for (const char* d : {"", "/etc", "/etc/ssl", "/etc/ssl/certs", "/etc/alternatives", "/usr", "/proc", "/dev",
                        "/tmp", "/root", "/home", "/var", "/var/tmp", "/var/log", "/var/cache", "/var/lib", "/run",
                        "/mnt", "/opt", "/srv", "/work"}) {
    if (!fs::create_directory(sk + d, ec) && ec) return absl::InternalError("mkdir " + sk + d + ": " + ec.message());
  }
  ::chmod((sk + "/tmp").c_str(), 01777);
  ::chmod((sk + "/var/tmp").c_str(), 01777);
  ::chmod((sk + "/root").c_str(), 0700);
  // The usr-merged links, for those the host's /usr has.
  for (const char* d : {"bin", "sbin", "lib", "lib64", "lib32", "libx32"}) {
    if (fs::exists(std::string("/usr/") + d, ec)) fs::create_symlink(std::string("usr/") + d, sk + "/" + d, ec);
  }
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/passwd", kPasswd));
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/group", kGroup));
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/hosts", kHosts));
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/nsswitch.conf", kNsswitch));
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/shells", "/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n"));
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/hostname", "sandbox\n"));
  // Only nameserver lines of the host's resolver configuration, nothing else from /etc.
  std::string resolv;
  if (auto r = ReadSmallFile("/etc/resolv.conf"); r.ok()) {
    std::istringstream in(*r);
    for (std::string line; std::getline(in, line);) {
      if (absl::StartsWith(line, "nameserver ")) resolv += line + "\n";
    }
  }
  RETURN_IF_ERROR(WriteNewFile(sk + "/etc/resolv.conf", resolv));
  fs::copy_file("/etc/ld.so.cache", sk + "/etc/ld.so.cache", fs::copy_options::overwrite_existing, ec);
  for (const char* ca : {"/etc/ssl/certs/ca-certificates.crt"}) {
    if (fs::is_regular_file(ca, ec)) fs::copy_file(ca, sk + ca, fs::copy_options::overwrite_existing, ec);
  }
  if (fs::exists("/usr/lib/os-release", ec)) fs::create_symlink("../usr/lib/os-release", sk + "/etc/os-release", ec);
  // Debian's alternatives are plain symlinks into /usr (awk, editor, pager...).
  for (const auto& e : fs::directory_iterator("/etc/alternatives", ec)) {
    if (!e.is_symlink(ec)) continue;
    fs::path target = fs::read_symlink(e.path(), ec);
    if (!ec && absl::StartsWith(target.string(), "/usr/")) {
      fs::create_symlink(target, sk + "/etc/alternatives/" + e.path().filename().string(), ec);
    }
  }
  if (::rename(sk.c_str(), skeleton_.c_str()) != 0) {
    RemoveTree(sk);  // another runtime built it first
    if (!fs::is_directory(skeleton_ + "/etc", ec)) return ErrnoStatus("rename " + skeleton_);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ImageStore::MountLayer(const std::string& src) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = mounts_.find(src); it != mounts_.end()) return it->second.get();
  UniqueFd tree(::open_tree(AT_FDCWD, src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree.valid()) return ErrnoStatus("open_tree " + src);
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<uint64_t>(userns_fd_);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
    return ErrnoStatus("id-mapped mount of " + src);
  }
  const int fd = tree.get();
  mounts_[src] = std::move(tree);
  return fd;
}

absl::StatusOr<ResolvedImage> ImageStore::Resolve(const std::string& image) {
  std::string top = image.empty() ? "default" : image;
  if (!image.empty() && image != "default" && !absl::StartsWith(image, "sha256:") && image[0] != '/') {
    if (!IsSafeId(image)) return absl::InvalidArgumentError("image: bad image name '" + image + "'");
    std::string dir = state_dir_ + "/images/" + image;
    std::error_code ec;
    if (fs::is_directory(dir + "/rootfs", ec)) {
      top = "dir:" + dir + "/rootfs";
    } else if (auto id = ReadSmallFile(dir + "/layer"); id.ok()) {
      top = std::string(absl::StripAsciiWhitespace(*id));
    } else {
      return absl::NotFoundError("image: no image named '" + image + "' under " + state_dir_ + "/images");
    }
  } else if (!image.empty() && image[0] == '/') {
    std::error_code ec;
    if (!fs::is_directory(image, ec)) return absl::NotFoundError("image: no directory " + image);
    top = "dir:" + image;
  }
  ResolvedImage r;
  r.top = top;
  std::string cur = top;
  for (int depth = 0; depth < 64; ++depth) {
    if (cur == "default") {
      ASSIGN_OR_RETURN(int sk, MountLayer(skeleton_));
      ASSIGN_OR_RETURN(int usr, MountLayer("/usr"));
      r.root_lowers.push_back(sk);
      r.usr_lowers.push_back(usr);
      return r;
    }
    if (absl::StartsWith(cur, "dir:")) {
      ASSIGN_OR_RETURN(int m, MountLayer(cur.substr(4)));
      r.root_lowers.push_back(m);
      r.usr_lowers.clear();
      return r;
    }
    if (!absl::StartsWith(cur, "sha256:") || !IsHexId(cur.substr(7))) {
      return absl::InvalidArgumentError("image: bad layer id '" + cur + "'");
    }
    std::string dir = state_dir_ + "/layers/" + cur.substr(7);
    auto parent = ReadSmallFile(dir + "/parent");
    if (!parent.ok()) return absl::NotFoundError("image: no layer " + cur);
    ASSIGN_OR_RETURN(int root, MountLayer(dir + "/root"));
    r.root_lowers.push_back(root);
    std::error_code ec;
    if (fs::is_directory(dir + "/usr", ec)) {
      ASSIGN_OR_RETURN(int usr, MountLayer(dir + "/usr"));
      r.usr_lowers.push_back(usr);
    }
    cur = std::string(absl::StripAsciiWhitespace(*parent));
  }
  return absl::FailedPreconditionError("image: layer chain of " + top + " is deeper than 64");
}

absl::StatusOr<SnapshotResult> ImageStore::Commit(int root_fd, int usr_fd, const std::string& parent,
                                                   const std::string& name) {
  if (!name.empty() && !IsSafeId(name)) return absl::InvalidArgumentError("name: bad image name '" + name + "'");
  std::string tmp = state_dir_ + "/layers/.tmp-" + NewId("l");
  if (::mkdir(tmp.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + tmp);
  LayerWriter writer(uid_base_);
  writer.AddText("parent " + parent + "\n");
  absl::Status s = writer.CopyTree(root_fd, tmp + "/root", "root");
  if (s.ok() && usr_fd >= 0) s = writer.CopyTree(usr_fd, tmp + "/usr", "usr");
  if (s.ok()) s = WriteNewFile(tmp + "/parent", parent + "\n");
  if (!s.ok()) {
    RemoveTree(tmp);
    return s;
  }
  std::string hex = writer.Finish();
  std::string final_dir = state_dir_ + "/layers/" + hex;
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    RemoveTree(tmp);  // the same content is already committed
    if (errno != ENOTEMPTY && errno != EEXIST) return ErrnoStatus("rename " + final_dir);
  }
  SnapshotResult r{.layer_id = "sha256:" + hex, .bytes = writer.bytes()};
  if (!name.empty()) {
    std::string dir = state_dir_ + "/images/" + name;
    ::mkdir(dir.c_str(), 0755);
    RETURN_IF_ERROR(WriteNewFile(dir + "/layer", r.layer_id + "\n"));
  }
  return r;
}

}  // namespace flotilla::sandbox
