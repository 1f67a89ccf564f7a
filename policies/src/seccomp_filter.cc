// Loading a seccomp program given as its instructions in the calling process, and handing its
// listener fd over. Apart from seccomp_install.cc so that an executable that only loads
// programs (the static sandbox zygote) links libc and nothing else.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "flotilla/common/fd_passing.h"
#include "flotilla/policies/child_enforcement.h"

namespace flotilla::policies {
namespace {

int SendFd(int socket_fd, int fd) noexcept {
  char byte = 'L';
  iovec iov{&byte, 1};
  return SendWithFds(socket_fd, &iov, 1, &fd, 1) < 0 ? errno : 0;
}

}  // namespace

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

}  // namespace flotilla::policies
