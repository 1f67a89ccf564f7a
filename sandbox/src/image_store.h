// Image layers on disk and their read-only, id-mapped mounts.
//
// Layout under the state dir:
//   layers/<sha256 hex>/{root/,usr/,parent}   a committed writable layer (uids stored as inside)
//   images/<name>/rootfs/                     a full root filesystem (debootstrap)
//   images/<name>/layer                       or: a name for a layer ("sha256:<hex>")
//   base/skeleton-<hash>/                     the default image's root (links into /usr, /etc),
//                                             rebuilt when the host files it copies change
//
// Every lower layer is an id-mapped, read-only mount of one of the above (or of /usr), so that
// files owned by host root appear as owned by root inside the sandbox (host uid base):
// `rm -rf /usr/bin` inside then succeeds in the sandbox's own upper layer while the host's
// /usr stays untouched. The mounts are detached (never attached anywhere on the host), held as
// descriptors: an init is given them and names them /proc/self/fd/<n> in its overlays.
//
// Thread-safety: all methods may be called concurrently. The store owns its mounts; they go
// with their descriptors when it is destroyed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {

struct ResolvedImage {
  std::vector<int> root_lowers;  // layer mounts (the store's descriptors), topmost first
  std::vector<int> usr_lowers;   // empty when the image is a full root filesystem
  std::string top;               // the layer id or base a snapshot records as parent
};

class ImageStore {
 public:
  static absl::StatusOr<std::unique_ptr<ImageStore>> Open(const std::string& state_dir, int userns_fd,
                                                          uint32_t uid_base);
  ~ImageStore();
  ImageStore(const ImageStore&) = delete;
  ImageStore& operator=(const ImageStore&) = delete;

  // "" / "default", "sha256:<hex>", an image name, or an absolute directory. The descriptors
  // stay valid as long as the store.
  absl::StatusOr<ResolvedImage> Resolve(const std::string& image);

  // Commits an upper layer (`root_fd`, and `usr_fd` or -1) on top of `parent` as a new
  // content-addressed layer; names it when `name` is not empty.
  absl::StatusOr<SnapshotResult> Commit(int root_fd, int usr_fd, const std::string& parent, const std::string& name);

 private:
  ImageStore() = default;
  absl::StatusOr<int> MountLayer(const std::string& src);  // cached by src
  absl::Status BuildSkeleton();

  std::string state_dir_;
  std::string skeleton_;  // <state>/base/skeleton-<inputs hash>
  int userns_fd_ = -1;
  uint32_t uid_base_ = 0;
  std::mutex mu_;
  std::map<std::string, UniqueFd> mounts_;  // source -> detached id-mapped mount
};

}  // namespace flotilla::sandbox
