// The runtime's side of the zygote: starting it (a fork, or an executable) and the requests
// it sends; zygote_main.cc is the zygote itself.
#include "zygote.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "flotilla/common/fd_passing.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/zygote_main.h"
#include "init_plan.h"
#include "zygote_protocol.h"

namespace flotilla::sandbox {
namespace {

// Starts `binary` as the zygote with the channel and the user namespace as descriptors 3 and 4.
absl::StatusOr<pid_t> SpawnZygoteBinary(const std::string& binary, int channel, int userns_fd, pid_t self) {
  // Out of the way of 3 and 4 first, so that the two dup2s cannot clobber each other.
  UniqueFd ch(::fcntl(channel, F_DUPFD_CLOEXEC, 10)), ns(::fcntl(userns_fd, F_DUPFD_CLOEXEC, 10));
  if (!ch.valid() || !ns.valid()) return ErrnoStatus("dup for the sandbox zygote");
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, ch.get(), 3);
  ::posix_spawn_file_actions_adddup2(&actions, ns.get(), 4);
  ::posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string pid_arg = std::to_string(self);
  char* argv[] = {const_cast<char*>("flotilla"), const_cast<char*>("sandbox"), const_cast<char*>("zygote"),
                  const_cast<char*>("3"),        const_cast<char*>("4"),       pid_arg.data(),
                  nullptr};
  char* envp[] = {nullptr};
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv, envp);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) return ErrnoStatus("starting the sandbox zygote " + binary, err);
  return pid;
}

}  // namespace

std::string SiblingExecutable(const std::string& name) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string path(self, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  std::string sibling = path.substr(0, slash + 1) + name;
  if (sibling == path || ::access(sibling.c_str(), X_OK) != 0) return "";
  return sibling;
}

std::string SiblingZygoteExecutable() {
  std::string zygote = SiblingExecutable("flotilla-zygote");
  return zygote.empty() ? SiblingExecutable("flotilla") : zygote;
}

absl::StatusOr<std::unique_ptr<Zygote>> Zygote::Start(int userns_fd, const std::string& binary) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("zygote socketpair");
  UniqueFd mine(sv[0]), theirs(sv[1]);
  const pid_t self = ::getpid();
  pid_t pid;
  if (binary.empty()) {
    CloneArgs args{};
    args.exit_signal = SIGCHLD;
    long r = ::syscall(SYS_clone3, &args, sizeof(args));
    if (r < 0) return ErrnoStatus("starting the sandbox zygote");
    if (r == 0) ZygoteMain(theirs.get(), userns_fd, self);
    pid = static_cast<pid_t>(r);
  } else {
    ASSIGN_OR_RETURN(pid, SpawnZygoteBinary(binary, theirs.get(), userns_fd, self));
  }
  theirs.Reset();
  std::unique_ptr<Zygote> z(new Zygote(pid, std::move(mine)));
  // The zygote says hello once it runs (an executable that is not a zygote closes the
  // channel by exiting instead).
  struct pollfd pfd {z->channel_.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&pfd, 1, 10000);
  } while (rc < 0 && errno == EINTR);
  char hello = 0;
  if (rc <= 0 || ::recv(z->channel_.get(), &hello, 1, 0) != 1 || hello != 'Z') {
    return absl::UnavailableError("the sandbox zygote did not start" +
                                  (binary.empty() ? std::string() : " (" + binary + ")"));
  }
  return z;
}

absl::Status Zygote::Prepare() {
  if (::send(channel_.get(), &kPrepareRequest, 1, MSG_NOSIGNAL) != 1) {
    if (errno == EPIPE || errno == ECONNRESET) return absl::UnavailableError("the sandbox zygote is gone");
    return ErrnoStatus("asking the sandbox zygote to prepare");
  }
  return absl::OkStatus();
}

Zygote::~Zygote() {
  channel_.Reset();
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

absl::StatusOr<Zygote::Spawned> Zygote::Spawn(const InitPlan& plan) {
  ASSIGN_OR_RETURN(EncodedInitPlan enc, EncodeInitPlan(plan));
  struct iovec iov {enc.bytes.data(), enc.bytes.size()};
  ssize_t n = SendWithFds(channel_.get(), &iov, 1, enc.fds.data(), static_cast<int>(enc.fds.size()));
  if (n < 0) {
    if (errno == EPIPE || errno == ECONNRESET) return absl::UnavailableError("the sandbox zygote is gone");
    return ErrnoStatus("sending a plan to the sandbox zygote");
  }
  ZygoteReply reply{};
  int fd = -1, nfds = 0;
  bool truncated = false;
  n = RecvWithFds(channel_.get(), &reply, sizeof(reply), &fd, 1, &nfds, &truncated);
  UniqueFd pidfd(nfds == 1 ? fd : -1);
  // A zygote that died with the plan still queued resets the connection.
  if (n == 0 || (n < 0 && errno == ECONNRESET)) return absl::UnavailableError("the sandbox zygote is gone");
  if (n < 0) return ErrnoStatus("reading the sandbox zygote's answer");
  if (n != static_cast<ssize_t>(sizeof(reply))) return absl::InternalError("short answer from the sandbox zygote");
  if (reply.rejected != 0) {
    return absl::InternalError("the sandbox zygote rejected the init plan");
  }
  if (reply.err != 0) return ErrnoStatus("clone3 sandbox init", reply.err);
  if (!pidfd.valid()) return absl::InternalError("the sandbox zygote answered without a pidfd");
  Spawned s;
  s.pid = reply.pid;
  s.pidfd = std::move(pidfd);
  s.layer_fd_in_init = reply.layer_fd;
  return s;
}

}  // namespace flotilla::sandbox
