// Loading a compiled seccomp program in the calling process, and receiving its listener fd
// (seccomp_filter.cc loads the instructions).
#include "flotilla/common/fd_passing.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::policies {

int InstallSeccompInChild(const SeccompProgram& program, int listener_socket) noexcept {
  return InstallSeccompFilterInChild(program.instructions().data(), program.instructions().size(),
                                     program.uses_notify(), listener_socket);
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
