// One message with descriptors attached (SCM_RIGHTS) over a Unix socket, each way.
//
// Both functions are async-signal-safe and never allocate: the sandbox's zygote and init (forks
// of multi-threaded processes) and a child installing its seccomp filter use them as well as
// the runtime. Both retry on EINTR.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace flotilla {

inline constexpr int kMaxPassedFds = 253;  // the kernel's SCM_MAX_FD

// Sends `iov` (one message) with `fds` (0..kMaxPassedFds of them) attached; MSG_NOSIGNAL.
// Returns the bytes sent, or -1 with errno (EINVAL for too many descriptors).
inline ssize_t SendWithFds(int sock, const struct iovec* iov, int iovcnt, const int* fds, int nfds) noexcept {
  if (nfds < 0 || nfds > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  std::memset(cbuf, 0, sizeof(cbuf));
  struct msghdr mh {};
  mh.msg_iov = const_cast<struct iovec*>(iov);
  mh.msg_iovlen = static_cast<size_t>(iovcnt);
  if (nfds > 0) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(nfds));
    struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(nfds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(nfds));
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Receives one message into `buf` and up to `max_fds` of its descriptors into `fds`
// (close-on-exec; any beyond `max_fds` are closed). *nfds says how many arrived; *truncated
// whether the message or its descriptors did not fit. Returns the bytes received (0: the peer
// closed), or -1 with errno.
inline ssize_t RecvWithFds(int sock, void* buf, size_t len, int* fds, int max_fds, int* nfds,
                           bool* truncated) noexcept {
  *nfds = 0;
  *truncated = false;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  struct iovec iov {buf, len};
  struct msghdr mh {};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  *truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int count = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*nfds < max_fds) {
        fds[(*nfds)++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  return n;
}

}  // namespace flotilla
