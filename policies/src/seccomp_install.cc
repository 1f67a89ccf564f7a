// Loading a compiled seccomp program in the calling process, and handing its listener fd over.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::policies {
namespace {

int SendFd(int socket_fd, int fd) noexcept {
  char byte = 'L';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof(control));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  while (sendmsg(socket_fd, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
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
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("receiving the seccomp listener fd");
  if (n == 0) return absl::FailedPreconditionError("the sandbox closed its socket before sending the seccomp listener fd");
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS ||
      cmsg->cmsg_len != CMSG_LEN(sizeof(int))) {
    return absl::FailedPreconditionError("message without a seccomp listener fd");
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return UniqueFd(fd);
}

}  // namespace flotilla::policies
