// What the runtime's side of the zygote (zygote.cc) and the zygote itself (zygote_main.cc)
// share: the messages on their channel (zygote.h describes the protocol) and the zygote's entry
// point. Libc only: zygote_main.cc is linked into the static flotilla-zygote executable.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace flotilla::sandbox {

// clone3's argument block (defined here: <linux/sched.h> clashes with glibc's <sched.h>).
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

// The zygote's answer to an init plan; the init's pidfd comes with it (SCM_RIGHTS).
struct ZygoteReply {
  int32_t err;
  int32_t pid;
  int32_t layer_fd;  // the writable layer's descriptor number inside the init
  int32_t rejected;  // 1: the message was not a whole plan
};

// The one-byte request to make the next init's namespaces ahead (an init plan is longer).
inline constexpr char kPrepareRequest = 'P';

// The zygote: says hello on `channel`, then clones an init for every plan it receives until
// the channel closes or `runtime_pid` (its parent) dies. Keeps `channel` and `userns_fd` and
// closes every other descriptor. Never returns.
[[noreturn]] void ZygoteMain(int channel, int userns_fd, pid_t runtime_pid);

}  // namespace flotilla::sandbox
