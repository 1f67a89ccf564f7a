#include "zygote.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flotilla/common/fd_passing.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/zygote_main.h"
#include "init_plan.h"

namespace flotilla::sandbox {
namespace {

// clone3's argument block (defined here: <linux/sched.h> clashes with glibc's <sched.h>).
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

struct ZygoteReply {
  int32_t err;
  int32_t pid;
  int32_t layer_fd;  // the writable layer's descriptor number inside the init
  int32_t rejected;  // 1: the message was not a whole plan
};

// The one-byte request to make the next init's namespaces ahead (an init plan is longer).
constexpr char kPrepareRequest = 'P';

// Static: the zygote is a fork of a multi-threaded process and never allocates.
alignas(8) char g_plan[kInitPlanMaxBytes];

// Network namespaces made ahead, loopback up: a new one takes the kernel over half a
// millisecond, which an init then does not wait for. One is made when the zygote starts; the
// next when the runtime asks (kPrepareRequest), once the last init has set itself up: made
// right after a clone, it would hold the CPU the new init is about to run on. They belong to
// the host's user namespace, like one made by the clone would.
constexpr int kNetnsPool = 1;
int g_netns[kNetnsPool];
int g_netns_count = 0;
int g_own_netns = -1;

void FillNetnsPool() {
  if (g_own_netns < 0 || g_netns_count >= kNetnsPool) return;
  bool moved = false;
  while (g_netns_count < kNetnsPool) {
    if (::unshare(CLONE_NEWNET) != 0) break;
    moved = true;
    BringLoopbackUp();
    int fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    g_netns[g_netns_count++] = fd;
  }
  if (moved && ::setns(g_own_netns, CLONE_NEWNET) != 0) ::_exit(1);  // never clone into a pooled one
}

// Sends `reply`, with `fd` attached when it is >= 0. Returns false when the channel is gone.
bool SendReply(int channel, const ZygoteReply& reply, int fd) {
  struct iovec iov {const_cast<ZygoteReply*>(&reply), sizeof(reply)};
  return SendWithFds(channel, &iov, 1, &fd, fd >= 0 ? 1 : 0) >= 0;
}

[[noreturn]] void ZygoteMain(int channel, int userns_fd, pid_t runtime_pid) {
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != runtime_pid) ::_exit(0);  // the runtime died before the line above
  const char hello = 'Z';
  if (::send(channel, &hello, 1, MSG_NOSIGNAL) != 1) ::_exit(1);
  static const char kName[] = "flotilla-zygote";
  (void)::prctl(PR_SET_NAME, reinterpret_cast<unsigned long>(kName), 0, 0, 0);
  const int lo = std::min(channel, userns_fd), hi = std::max(channel, userns_fd);
  if (lo > 0) ::close_range(0, static_cast<unsigned>(lo) - 1, 0);
  if (hi > lo + 1) ::close_range(static_cast<unsigned>(lo) + 1, static_cast<unsigned>(hi) - 1, 0);
  ::close_range(static_cast<unsigned>(hi) + 1, ~0u, 0);
  // Default dispositions, nothing blocked: the handlers of the process this is a fork of are
  // no business of the zygote's, nor of the inits (and their execs) it clones.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  g_own_netns = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  PrepareInitsInZygote();
  FillNetnsPool();
  for (;;) {
    int fds[kInitPlanMaxFds];
    int nfds = 0;
    bool truncated = false;
    ssize_t n = RecvWithFds(channel, g_plan, sizeof(g_plan), fds, kInitPlanMaxFds, &nfds, &truncated);
    if (n == 0) ::_exit(0);  // the runtime closed the channel
    if (n < 0) ::_exit(1);
    if (n == 1 && nfds == 0 && g_plan[0] == kPrepareRequest) {
      FillNetnsPool();  // no answer
      continue;
    }
    ZygoteReply reply{};
    InitPlanView plan;
    int pidfd = -1;
    if (truncated ||
        !plan.Decode(g_plan, static_cast<size_t>(n), fds, nfds, userns_fd)) {
      reply.err = EINVAL;
      reply.rejected = 1;
    } else {
      const int netns = g_netns_count > 0 ? g_netns[--g_netns_count] : -1;
      CloneArgs args{};
      args.flags = CLONE_PIDFD | CLONE_PARENT | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                   (netns < 0 ? CLONE_NEWNET : 0);
      args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
      long r = ::syscall(SYS_clone3, &args, sizeof(args));
      if (r == 0) {
        if (netns >= 0 && ::setns(netns, CLONE_NEWNET) != 0) ::_exit(127);  // set-up fails, reported
        if (netns >= 0) ::close(netns);
        RunInit(plan);
      }
      if (netns >= 0) ::close(netns);
      reply.err = r < 0 ? errno : 0;
      reply.pid = r < 0 ? 0 : static_cast<int32_t>(r);
      reply.layer_fd = plan.tmpfs_fd();
    }
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
    bool sent = SendReply(channel, reply, pidfd);
    if (pidfd >= 0) ::close(pidfd);
    if (!sent) ::_exit(1);
  }
}

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

bool RunZygoteIfAsked(int argc, char** argv) {
  if (argc != 6 || std::strcmp(argv[1], "sandbox") != 0 || std::strcmp(argv[2], "zygote") != 0) return false;
  int channel = std::atoi(argv[3]), userns_fd = std::atoi(argv[4]);
  pid_t runtime = static_cast<pid_t>(std::atol(argv[5]));
  if (channel < 3 || userns_fd < 3 || channel == userns_fd || runtime <= 0) ::_exit(2);
  ZygoteMain(channel, userns_fd, runtime);
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
