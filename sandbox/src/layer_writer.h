// LayerWriter: copies an overlay upper directory into a layer directory and hashes it.
//
// The walk is canonical (entries sorted by name, depth first) and the hash covers, per entry,
// its path, type, mode, owner (as seen inside the sandbox), size and content, link target,
// device number (overlay whiteouts are 0:0 character devices) and the overlay opaque mark.
// Owners are stored shifted down by the uid base, so the layer holds the ids seen inside;
// setuid/setgid bits of regular files are dropped (every sandbox mount is nosuid anyway).
// Not thread-safe; one writer per commit.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace flotilla::sandbox {

class LayerWriter {
 public:
  explicit LayerWriter(uint32_t uid_base);
  ~LayerWriter();
  LayerWriter(const LayerWriter&) = delete;
  LayerWriter& operator=(const LayerWriter&) = delete;

  void AddText(const std::string& s);
  // Copies the tree under `src_fd` to `dst` (created), hashing it under the name `tag`.
  absl::Status CopyTree(int src_fd, const std::string& dst, const std::string& tag);
  // The hex sha256 of everything added.
  std::string Finish();
  uint64_t bytes() const { return bytes_; }

 private:
  absl::Status CopyDir(int src_fd, int dst_fd, const std::string& rel, int depth);
  absl::Status CopyEntry(int src_dir, int dst_dir, const std::string& name, const std::string& rel, int depth);

  uint32_t uid_base_;
  EVP_MD_CTX* ctx_;
  uint64_t bytes_ = 0;
};

}  // namespace flotilla::sandbox
