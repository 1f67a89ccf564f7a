// Loading a compiled seccomp program in the calling process, and handing its listener fd over.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/common/fd_passing.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::policies {
namespace {

int SendFd(int socket_fd, int fd) noexcept {
  char byte = 'L';
  iovec iov{&byte, 1};
  return SendWithFds(socket_fd, &iov, 1, &fd, 1) < 0 ? errno : 0;
}

}  // namespace

int InstallSeccompInChild(const SeccompProgram& program, int listener_socket) noexcept {
  return InstallSeccompFilterInChild(program.instructions().data(), program.instructions().size(),
                                     program.uses_notify(), listener_socket);
}

int InstallSeccompFilterInChild(const sock_filter* insns, size_t count, bool uses_notify,
                                int listener_socket) noexcept {
  if (count == 0 || count > BPF_MAXINSNS) return EINVAL;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(count);
  prog.filter = const_cast<sock_filter*>(insns);
  unsigned int flags = uses_notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
  long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
  if (rc < 0) return errno;
  if (!uses_notify) return 0;
  int listener = static_cast<int>(rc);
  int err = listener_socket >= 0 ? SendFd(listener_socket, listener) : EBADF;
  close(listener);
  return err;
}

absl::Status InstallSeccomp(const SeccompProgram& program, int listener_socket) {
  if (program.uses_notify() && listener_socket < 0) {
    return absl::InvalidArgumentError("seccomp program counts violations: it needs a listener socket");
  }
  if (int err = InstallSeccompInChild(program, listener_socket); err != 0) {
    return ErrnoStatus("installing the seccomp filter", err);
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> ReceiveListenerFd(int socket_fd) {
  char byte = 0;
  int fd = -1, nfds = 0;
  bool truncated = false;
  ssize_t n = RecvWithFds(socket_fd, &byte, 1, &fd, 1, &nfds, &truncated);
  UniqueFd received(nfds == 1 ? fd : -1);
  if (n < 0) return ErrnoStatus("receiving the seccomp listener fd");
  if (n == 0) return absl::FailedPreconditionError("the sandbox closed its socket before sending the seccomp listener fd");
  if (!received.valid()) return absl::FailedPreconditionError("message without a seccomp listener fd");
  return received;
}

}  // namespace flotilla::policies
