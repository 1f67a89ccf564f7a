// An OCI bundle over the same image as the sandbox's embedded default (the host's /usr
// read-only, the /bin, /lib, /sbin links into it, and a small generated /etc) for measuring
// `runc run` side by side with the sandbox runtime.
//
// Ownership: the bundle owns its directory and removes it on destruction; it owns the runc
// state root used by Run. Thread-safety: Run may be called concurrently with distinct ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::bench {

struct RuncBundleOptions {
  std::string runc;                // path of the runc binary
  std::string dir;                 // created; must not exist
  std::vector<std::string> args;   // the container's process
  uint64_t memory_bytes = 0;       // 0: no limit
  int64_t pids = 0;                // 0: no limit
};

class RuncBundle {
 public:
  static absl::StatusOr<std::unique_ptr<RuncBundle>> Create(const RuncBundleOptions& options);
  ~RuncBundle();
  RuncBundle(const RuncBundle&) = delete;
  RuncBundle& operator=(const RuncBundle&) = delete;

  // `runc --root <state> run --bundle <dir> <container_id>` as a whole process: create,
  // start, wait for the process, delete. OK when the container's process exits 0.
  absl::Status Run(const std::string& container_id) const;

  const std::string& dir() const { return options_.dir; }

 private:
  explicit RuncBundle(RuncBundleOptions options) : options_(std::move(options)) {}
  RuncBundleOptions options_;
};

}  // namespace flotilla::bench
