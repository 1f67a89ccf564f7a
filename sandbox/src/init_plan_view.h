// InitPlan on the wire: the runtime encodes a plan into one flat buffer plus a list of
// descriptors (sent together over a unix socket; init_plan.h); the zygote and the init it
// clones read the buffer in place through InitPlanView, without allocating. Libc only: the
// static flotilla-zygote executable links the code of this header (init_plan_view.cc).
//
// Layout: a WireHeader, the WireStep and WireHook arrays, then NUL-terminated strings and
// 8-byte aligned hook data, all addressed by byte offsets from the start; the buffer ends
// with a NUL. Descriptors: [0] control socket, [1] writable-layer tmpfs, [2, 2 + n_layer_fds)
// the image layers, then hook fds.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>

#include "init_process.h"

namespace flotilla::sandbox {

inline constexpr uint32_t kInitPlanMagic = 0x46505031;  // "FPP1"
inline constexpr size_t kInitPlanMaxBytes = 256 * 1024;
inline constexpr int kInitPlanMaxFds = 160;  // a snapshot chain of 64 layers takes 128

struct InitPlanWireStep {
  uint32_t kind, source, target, fstype, data, mode, optional, pad;
  uint64_t flags, dev;
};

struct InitPlanWireHook {
  uint32_t kind, pad;
  uint32_t data, len;
  int32_t fd_index;  // into the descriptor list, -1: none
  uint32_t stage;    // 0: before the user namespace switch, 1: last
};

struct InitPlanWireHeader {
  uint32_t magic, total;
  uint32_t rw_dir, root_dir, hostname;
  uint32_t n_procs, procs;  // NUL-separated strings from `procs`
  uint32_t n_steps, steps;
  uint32_t n_hooks, hooks;
  uint32_t flags;  // bit 0: sched_idle, bit 1: core_sched
  uint32_t n_fds, n_layer_fds;
  uint64_t keep_caps;
};

// The data of a kSeccomp hook: this header, then the program's `count` instructions.
struct SeccompHookHeader {
  uint32_t uses_notify;
  uint32_t count;
};

// Runs one hook in the calling process (async-signal-safe). 0, or an errno (EINVAL for an
// unknown kind or data that is not a whole encoding).
int RunChildHook(uint32_t kind, const char* data, size_t len, int fd) noexcept;

// A decoded plan over a buffer it does not own. No allocation anywhere.
class InitPlanView {
 public:
  // Checks every offset and count of `data` (which must start 8-byte aligned); `fds` are this
  // process's numbers for the wire descriptors, `userns_fd` the user namespace init enters.
  // False when the buffer is not a whole plan or the descriptor count differs.
  bool Decode(const char* data, size_t len, const int* fds, int nfds, int userns_fd);

  int control_fd() const { return fds_[0]; }
  int tmpfs_fd() const { return fds_[1]; }
  int layer_fd_count() const { return static_cast<int>(h_.n_layer_fds); }
  int layer_fd(int i) const { return fds_[2 + i]; }
  int userns_fd() const { return userns_fd_; }
  const int* fds() const { return fds_; }
  int nfds() const { return nfds_; }
  const char* rw_dir() const { return At(h_.rw_dir); }
  const char* root_dir() const { return At(h_.root_dir); }
  const char* hostname() const { return At(h_.hostname); }
  bool sched_idle() const { return (h_.flags & 1) != 0; }
  bool core_sched() const { return (h_.flags & 2) != 0; }
  uint64_t keep_caps() const { return h_.keep_caps; }

  uint32_t cgroup_proc_count() const { return h_.n_procs; }
  const char* first_cgroup_proc() const { return At(h_.procs); }  // next: s + strlen(s) + 1

  uint32_t step_count() const { return h_.n_steps; }
  InitPlanWireStep step(uint32_t i) const;
  const char* At(uint32_t offset) const { return data_ + offset; }

  // Runs the hooks of `stage` in order; 0, or the first errno.
  int RunHooks(uint32_t stage) const;

 private:
  const char* data_ = nullptr;
  size_t len_ = 0;
  InitPlanWireHeader h_{};
  int fds_[kInitPlanMaxFds] = {};
  int nfds_ = 0;
  int userns_fd_ = -1;
};

}  // namespace flotilla::sandbox
