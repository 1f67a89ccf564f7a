// The child side of a sandbox: everything that runs in the cloned process, from namespace and
// filesystem set-up to the PID 1 loop that starts execs and reaps zombies.
//
// The runtime builds an InitPlan, encodes it (init_plan.h) and hands it to the zygote
// (zygote.h), which clones the init; the init reads the plan in place from the zygote's
// receive buffer (init_plan_view.h). Init never allocates and uses raw system calls only: it
// is a copy of a process that was forked from a multi-threaded one (the same rules as after
// vfork).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::sandbox {

class InitPlanView;

// One step of the root filesystem set-up, run in order before pivot_root.
struct InitStep {
  enum class Kind : uint32_t { kMount = 1, kMkdir = 2, kMknod = 3, kSymlink = 4 };
  // In a kMount step's data, kLayerFdMark followed by one byte i + 1 stands for the path of
  // layer_fds[i] in init ("/proc/self/fd/<init's number>"): how an overlay names lower
  // layers that are detached mounts, held only as descriptors.
  static constexpr char kLayerFdMark = '\x01';
  Kind kind = Kind::kMount;
  std::string source;  // mount source; symlink target
  std::string target;  // absolute path in the child's mount namespace
  std::string fstype, data;
  unsigned long flags = 0;  // mount flags
  unsigned int mode = 0;    // mkdir / mknod mode (S_IFCHR | perms)
  unsigned long dev = 0;    // mknod device
  bool optional = false;    // failure is ignored (e.g. a /proc file this kernel lacks)
};

// An enforcer's step in init. Init runs it on its copy of `data` (8-byte aligned), with
// init's number for `fd` (-1: none); see RunChildHook (init_plan_view.h) for what each kind does.
// Kinds, not code addresses: the zygote may be another executable than the runtime's.
enum class ChildHookKind : uint32_t {
  kLandlock = 1,  // data: LandlockPlan::encoded()
  kSeccomp = 2,   // data: EncodeSeccompHook(); fd: the socket the listener fd goes to
  kAppArmor = 3,  // data: the name of a loaded profile to move init under (before_userns)
};
struct ChildHook {
  ChildHookKind kind = ChildHookKind::kLandlock;
  std::string data;
  int fd = -1;  // a descriptor of the runtime's, passed to init
};

struct InitPlan {
  int control_fd = -1;  // init's end of the control socket
  int tmpfs_fd = -1;    // detached writable-layer tmpfs, attached at rw_dir
  std::vector<int> layer_fds;  // detached image layer mounts, named in mount data (kLayerFdMark);
                               // init closes them once the steps have run
  std::string rw_dir;   // where the writable layer is attached (in the child's mount ns)
  std::string root_dir; // the merged root
  std::vector<std::string> cgroup_procs;  // files init writes "0" into
  std::vector<InitStep> steps;            // in order, before pivot_root
  std::string hostname;
  bool sched_idle = false;
  bool core_sched = false;
  uint64_t keep_caps = 0;  // capability bounding set kept (bit per CAP_*)
  std::vector<ChildHook> before_userns;  // after pivot_root, before the user namespace switch
  std::vector<ChildHook> last;           // after no_new_privs (e.g. Landlock, seccomp)
};

// Runs in the cloned child; never returns. `plan` holds init's descriptor numbers (every
// other inherited descriptor is closed) and the user namespace to enter.
[[noreturn]] void RunInit(const InitPlanView& plan);

// Called once by the zygote, before it clones any init: finds what every init would otherwise
// look up again (the argv area it overwrites to hide the runtime's command line).
void PrepareInitsInZygote();

// Sets the loopback interface of the caller's network namespace up (no allocation).
void BringLoopbackUp();

// The default kept capabilities (Docker's default set minus NET_RAW and MKNOD).
uint64_t DefaultKeptCapabilities();

}  // namespace flotilla::sandbox
