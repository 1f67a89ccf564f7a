// The child side of a sandbox: everything that runs in the cloned process, from namespace and
// filesystem set-up to the PID 1 loop that starts execs and reaps zombies.
//
// The plan is built by the runtime before clone and only read afterwards: the child runs in a
// copy of a multi-threaded process, so it never allocates, takes no locks and uses raw
// system calls only (the same rules as after vfork).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::sandbox {

// One step of the root filesystem set-up, run in order before pivot_root.
struct InitStep {
  enum class Kind { kMount, kMkdir, kMknod, kSymlink };
  Kind kind = Kind::kMount;
  std::string source;  // mount source; symlink target
  std::string target;  // absolute path in the child's mount namespace
  std::string fstype, data;
  unsigned long flags = 0;  // mount flags
  unsigned int mode = 0;    // mkdir / mknod mode (S_IFCHR | perms)
  unsigned long dev = 0;    // mknod device
  bool optional = false;    // failure is ignored (e.g. a /proc file this kernel lacks)
};

// Called in the child after pivot_root and before the user namespace switch; must be
// async-signal-safe (no allocation). Returns 0 or an errno.
using ChildHook = int (*)(void* arg);

struct InitPlan {
  int control_fd = -1;  // init's end of the control socket
  int userns_fd = -1;   // the runtime's user namespace (root inside = host uid base)
  int tmpfs_fd = -1;    // detached writable-layer tmpfs, attached at rw_dir
  std::string rw_dir;   // where the writable layer is attached (in the child's mount ns)
  std::string root_dir; // the merged root
  std::vector<std::string> cgroup_procs;  // files init writes "0" into
  std::vector<InitStep> steps;            // in order, before pivot_root
  std::vector<int> extra_fds;             // descriptors the hooks use (kept open)
  std::vector<int> keep_fds;              // sorted; every other inherited fd is closed
  std::string hostname;
  bool sched_idle = false;
  bool core_sched = false;
  uint64_t keep_caps = 0;  // capability bounding set kept (bit per CAP_*)
  std::vector<std::pair<ChildHook, void*>> before_userns;  // e.g. Landlock (needs fs)
  std::vector<std::pair<ChildHook, void*>> last;           // e.g. seccomp (after no_new_privs)
};

// Runs in the cloned child; never returns.
[[noreturn]] void RunInit(const InitPlan& plan);

// The default kept capabilities (Docker's default set minus NET_RAW and MKNOD).
uint64_t DefaultKeptCapabilities();

}  // namespace flotilla::sandbox
