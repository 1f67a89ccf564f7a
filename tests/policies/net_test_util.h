// Helpers of the eBPF network tests: a cgroup v2 directory per test, loopback listeners, and
// connect/sendto attempts from a child placed in a cgroup.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <string>

#include "flotilla/common/unique_fd.h"
#include "gtest/gtest.h"

namespace flotilla::policies::nettest {

// A cgroup v2 directory for one test; removed on destruction.
class TempCgroup {
 public:
  explicit TempCgroup(const std::string& root) : path_(root + "/flotilla-test-" + std::to_string(getpid()) + "-" + std::to_string(counter_++)) {
    ok_ = mkdir(path_.c_str(), 0755) == 0;
    if (ok_) fd_ = UniqueFd(open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  ~TempCgroup() {
    fd_.Reset();
    if (ok_) rmdir(path_.c_str());
  }
  bool ok() const { return ok_ && fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  bool AddProcess(pid_t pid) const {
    std::ofstream procs(path_ + "/cgroup.procs");
    procs << pid;
    procs.flush();
    return procs.good();
  }

 private:
  static inline int counter_ = 0;
  std::string path_;
  bool ok_ = false;
  UniqueFd fd_;
};

// A listening TCP socket (or bound UDP socket) on an ephemeral loopback port.
struct Listener {
  UniqueFd fd;
  uint16_t port = 0;
};

inline Listener Listen(int family, int type, const char* addr) {
  Listener l;
  l.fd = UniqueFd(socket(family, type | SOCK_CLOEXEC, 0));
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &sin->sin_addr);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &sin6->sin6_addr);
    len = sizeof(sockaddr_in6);
  }
  EXPECT_EQ(bind(l.fd.get(), reinterpret_cast<sockaddr*>(&ss), len), 0) << addr << ": " << strerror(errno);
  if (type == SOCK_STREAM) {
    EXPECT_EQ(listen(l.fd.get(), 16), 0);
  }
  EXPECT_EQ(getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len), 0);
  l.port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return l;
}

// connect() or sendto() from the calling process; returns 0 or errno.
inline int Reach(int family, int type, const char* addr, uint16_t port) {
  int fd = socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    inet_pton(AF_INET, addr, &sin->sin_addr);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    inet_pton(AF_INET6, addr, &sin6->sin6_addr);
    len = sizeof(sockaddr_in6);
  }
  int rc = type == SOCK_STREAM ? connect(fd, reinterpret_cast<sockaddr*>(&ss), len)
                               : static_cast<int>(sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&ss), len));
  int err = rc < 0 ? errno : 0;
  close(fd);
  return err;
}

struct Attempt {
  int family;
  int type;
  const char* addr;
  uint16_t port;
};

// Runs `attempts` from a child placed in `cg`; returns each errno.
template <size_t N>
std::array<int, N> RunInCgroup(const TempCgroup& cg, const std::array<Attempt, N>& attempts) {
  std::array<int, N> result;
  result.fill(-1);
  int go[2];
  int out[2];
  EXPECT_EQ(pipe2(go, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    std::array<int, N> err;
    for (size_t i = 0; i < N; ++i) err[i] = Reach(attempts[i].family, attempts[i].type, attempts[i].addr, attempts[i].port);
    (void)!write(out[1], err.data(), sizeof(err));
    _exit(0);
  }
  close(go[0]);
  close(out[1]);
  EXPECT_TRUE(cg.AddProcess(pid));
  (void)!write(go[1], "g", 1);
  close(go[1]);
  EXPECT_EQ(read(out[0], result.data(), sizeof(result)), static_cast<ssize_t>(sizeof(result)));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return result;
}

}  // namespace flotilla::policies::nettest
