// Zygote: a small single-threaded process, forked by the runtime when it opens (before it
// starts its threads and loads its enforcers), that clones every sandbox init on request.
// Inits are then copies of this small process rather than of the large, multi-threaded
// runtime: no copy-on-write faults and TLB shootdowns in the runtime after each clone, and
// less page-table copying per init.
//
// Protocol (SOCK_SEQPACKET, zygote.cc): the runtime sends an encoded InitPlan with its
// descriptors (SCM_RIGHTS); the zygote clones the init with CLONE_PARENT, so the init is a
// child of the runtime process (the runtime reaps it through its pidfd, and the init's
// parent-death signal is tied to the runtime thread that forked the zygote), and answers with
// the init's pid, its pidfd (SCM_RIGHTS) and the number of the writable layer's descriptor
// inside the init.
//
// Not thread-safe: the caller serializes Spawn and Prepare (the runtime under a mutex, from
// whichever thread creates a sandbox); the thread that starts it must outlive every init. The zygote exits when the channel closes or the thread that
// forked it dies; destruction closes the channel and reaps it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "init_process.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {

class Zygote {
 public:
  // Starts the zygote as a child of the calling thread: a fork of this process when `binary`
  // is empty, else `binary` (see zygote_main.h) started with posix_spawn. It keeps
  // `userns_fd` (the runtime's user namespace) and closes every other descriptor it
  // inherited. Returns once the zygote has said it runs; Unavailable when it did not start.
  static absl::StatusOr<std::unique_ptr<Zygote>> Start(int userns_fd, const std::string& binary = "");
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  struct Spawned {
    pid_t pid = 0;
    UniqueFd pidfd;
    int layer_fd_in_init = -1;
  };
  // Clones an init that runs `plan` in new mount, pid, net, uts and ipc namespaces.
  // Unavailable when the zygote is gone; the clone's errno otherwise.
  absl::StatusOr<Spawned> Spawn(const InitPlan& plan);
  // Asks the zygote to make the next init's network namespace now (one is made when it starts;
  // after that only on request, so that the work never lands while an init is being cloned
  // and set up). Does not wait. Unavailable when the zygote is gone.
  absl::Status Prepare();

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  Zygote(pid_t pid, UniqueFd channel) : pid_(pid), channel_(std::move(channel)) {}
  pid_t pid_;
  UniqueFd channel_;
};

}  // namespace flotilla::sandbox
