// Seccomp: compile a policy's syscall rules to a BPF program once, load it in a sandbox child,
// and count every denied call in a supervisor that answers it with EPERM.
//
// Flow (the runtime, per sandbox):
//   parent, once per policy : prog = SeccompCompiler::Get(policy)         (cached)
//   parent, per sandbox     : socketpair(AF_UNIX, SOCK_SEQPACKET) -> {parent_end, child_end}
//   child after fork/clone  : InstallSeccompInChild(*prog, child_end)     (async-signal-safe)
//   parent                  : fd = ReceiveListenerFd(parent_end);
//                             watch = supervisor.Watch(sandbox_id, std::move(fd));
//   any time                : watch->violations()
//
// With counting on (the default) the denied syscalls go to SECCOMP_RET_USER_NOTIF: the kernel
// parks the caller, the supervisor thread answers -EPERM and increments the sandbox's counter.
// If the supervisor is gone, the kernel fails the calls with ENOSYS: still denied.
// clone3 always returns ENOSYS (so libc falls back to clone, whose flags can be filtered) and is
// not counted: glibc probes it on every thread and process creation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <linux/filter.h>

#include "absl/status/statusor.h"
#include "flotilla/policies/child_enforcement.h"
#include "flotilla/policies/policy.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::policies {

struct SeccompOptions {
  // true: denied calls go to the user-notification supervisor (counted, answered EPERM).
  // false: denied calls return EPERM straight from the filter (nothing counted).
  bool count_violations = true;
};

// A compiled, immutable seccomp BPF program. Thread-safe (read-only); shared by all sandboxes
// of one policy.
class SeccompProgram {
 public:
  SeccompProgram(std::vector<sock_filter> insns, bool uses_notify)
      : insns_(std::move(insns)), uses_notify_(uses_notify) {}
  [[nodiscard]] const std::vector<sock_filter>& instructions() const { return insns_; }
  // True when loading it creates a listener fd that must go to a SeccompSupervisor.
  [[nodiscard]] bool uses_notify() const { return uses_notify_; }

 private:
  std::vector<sock_filter> insns_;
  bool uses_notify_;
};

// Builds the program with libseccomp (no cache). InvalidArgument for an unknown syscall name.
absl::StatusOr<std::shared_ptr<const SeccompProgram>> CompileSeccomp(
    const SyscallPolicy& policy, const SeccompOptions& options = {});

// Process-wide cache of compiled programs keyed by (syscall policy, options).
// Thread-safe. Programs live as long as any holder or the cache.
class SeccompCompiler {
 public:
  static absl::StatusOr<std::shared_ptr<const SeccompProgram>> Get(
      const Policy& policy, const SeccompOptions& options = {});
};

// In the calling process: sets no_new_privs, loads `program`; when it uses notify, sends the
// listener fd over the unix socket `listener_socket` (SCM_RIGHTS) and closes it here.
// Async-signal-safe (no allocation, no locks): fit for a child between fork and exec.
// Returns 0 or an errno value.
int InstallSeccompInChild(const SeccompProgram& program, int listener_socket) noexcept;
// (InstallSeccompFilterInChild, child_enforcement.h: the same for a program given as its
// instructions, e.g. copied into a process that does not share the compiler's memory.)
// The same with a Status, for ordinary callers. listener_socket may be -1 when !uses_notify().
absl::Status InstallSeccomp(const SeccompProgram& program, int listener_socket);

// Receives the listener fd sent by InstallSeccompInChild (blocks until it arrives or the peer
// closes its end: then FailedPrecondition).
absl::StatusOr<UniqueFd> ReceiveListenerFd(int socket_fd);

// One sandbox's registration with a supervisor. Owns the listener fd; destruction unregisters
// it from the supervisor and closes it (later denied calls fail with ENOSYS). Thread-safe
// reads. Must not outlive its supervisor.
class SeccompWatch {
 public:
  ~SeccompWatch();
  SeccompWatch(const SeccompWatch&) = delete;
  SeccompWatch& operator=(const SeccompWatch&) = delete;

  [[nodiscard]] const std::string& sandbox_id() const { return sandbox_id_; }
  // Denied syscalls answered so far.
  [[nodiscard]] uint64_t violations() const { return violations_.load(std::memory_order_relaxed); }
  // Number of the most recent denied syscall, or -1.
  [[nodiscard]] int last_syscall() const { return last_syscall_.load(std::memory_order_relaxed); }

 private:
  friend class SeccompSupervisor;
  SeccompWatch(class SeccompSupervisor* owner, std::string sandbox_id, UniqueFd listener);

  class SeccompSupervisor* owner_;
  std::string sandbox_id_;
  UniqueFd listener_;
  std::atomic<uint64_t> violations_{0};
  std::atomic<int> last_syscall_{-1};
};

// One thread with an epoll loop over every sandbox's listener fd: answers each notification
// with -EPERM and counts it on the sandbox's SeccompWatch. Thread-safe. Destruction stops the
// thread; every SeccompWatch must be destroyed first.
class SeccompSupervisor {
 public:
  static absl::StatusOr<std::unique_ptr<SeccompSupervisor>> Start();
  ~SeccompSupervisor();
  SeccompSupervisor(const SeccompSupervisor&) = delete;
  SeccompSupervisor& operator=(const SeccompSupervisor&) = delete;

  // Takes ownership of `listener` and starts answering it.
  absl::StatusOr<std::unique_ptr<SeccompWatch>> Watch(std::string sandbox_id, UniqueFd listener);
  // Sum of violations over every watch ever registered.
  [[nodiscard]] uint64_t total_violations() const;

 private:
  friend class SeccompWatch;
  class Loop;
  explicit SeccompSupervisor(std::unique_ptr<Loop> loop);
  void Unregister(SeccompWatch* watch);
  std::unique_ptr<Loop> loop_;
};

}  // namespace flotilla::policies
