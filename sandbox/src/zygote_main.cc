// The zygote process (zygote.h): the side of the channel that clones inits. Libc and the
// init's code only (no allocation after start, raw system calls): it runs as a fork of the
// runtime or as the static flotilla-zygote executable.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "flotilla/common/fd_passing.h"
#include "flotilla/sandbox/zygote_main.h"
#include "init_plan_view.h"
#include "zygote_protocol.h"

namespace flotilla::sandbox {
namespace {

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

}  // namespace

void ZygoteMain(int channel, int userns_fd, pid_t runtime_pid) {
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

bool RunZygoteIfAsked(int argc, char** argv) {
  if (argc != 6 || std::strcmp(argv[1], "sandbox") != 0 || std::strcmp(argv[2], "zygote") != 0) return false;
  int channel = std::atoi(argv[3]), userns_fd = std::atoi(argv[4]);
  pid_t runtime = static_cast<pid_t>(std::atol(argv[5]));
  if (channel < 3 || userns_fd < 3 || channel == userns_fd || runtime <= 0) ::_exit(2);
  ZygoteMain(channel, userns_fd, runtime);
}

}  // namespace flotilla::sandbox
