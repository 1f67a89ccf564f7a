#include "init_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "flotilla/common/fd_passing.h"
#include "init_plan_view.h"
#include "init_protocol.h"

#ifndef PR_SCHED_CORE
#define PR_SCHED_CORE 62
#define PR_SCHED_CORE_CREATE 1
#endif
#ifndef PR_SCHED_CORE_SCOPE_THREAD_GROUP
#define PR_SCHED_CORE_SCOPE_THREAD_GROUP 1
#endif

extern char** environ;

namespace flotilla::sandbox {
namespace {

// Reports a set-up failure to the runtime and exits. No allocation.
[[noreturn]] void Fail(int ctl, const char* step, int err) {
  char buf[512];
  InitHeader h{};
  h.type = InitMsg::kSetupError;
  size_t n = 0;
  auto append = [&](const char* s) {
    while (*s && n < sizeof(buf) - sizeof(h) - 1) buf[sizeof(h) + n++] = *s++;
  };
  append(step);
  append(": ");
  append(strerrordesc_np(err) ? strerrordesc_np(err) : "error");
  h.arg = err;
  h.payload_len = static_cast<uint32_t>(n);
  std::memcpy(buf, &h, sizeof(h));
  (void)!::send(ctl, buf, sizeof(h) + n, MSG_NOSIGNAL);
  ::_exit(1);
}

int WriteAll(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    s += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}


int SetCapabilities(uint64_t keep) {
  for (int cap = 0; cap <= 63; ++cap) {
    if (keep & (1ull << cap)) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct __user_cap_header_struct hdr {};
  hdr.version = _LINUX_CAPABILITY_VERSION_3;
  struct __user_cap_data_struct data[2] {};
  data[0].effective = data[0].permitted = static_cast<uint32_t>(keep);
  data[1].effective = data[1].permitted = static_cast<uint32_t>(keep >> 32);
  if (::syscall(SYS_capset, &hdr, data) != 0) return errno;
  return 0;
}

// Closes every inherited descriptor except the plan's: init must not hold other sandboxes'
// channels or layers, or whatever the zygote inherited.
// init's own /proc/self/oom_score_adj, opened before init entered the user namespace; -1
// where it could not be opened.
int g_oom_adj_fd = -1;

// The OOM killer's bias for the commands (init keeps 0). An OOM kill then hits a command, which
// only ends itself, before init, whose death would end the sandbox (init, a clone of the
// runtime's zygote, can look larger than a shell to the OOM killer); and on the host, sandbox
// commands go before the host's own processes, as orchestrators do for best-effort work.
constexpr char kCommandOomScoreAdj[] = "500";

void SetOwnOomScoreAdj(const char* value) {
  if (g_oom_adj_fd >= 0) (void)!::pwrite(g_oom_adj_fd, value, std::strlen(value), 0);
}

void CloseInherited(const InitPlanView& p) {
  int keep[kInitPlanMaxFds + 1];
  int n = 0;
  for (int i = 0; i < p.nfds(); ++i) keep[n++] = p.fds()[i];
  keep[n++] = p.userns_fd();
  std::sort(keep, keep + n);
  unsigned int from = 0;
  for (int i = 0; i < n; ++i) {
    unsigned int fd = static_cast<unsigned int>(keep[i]);
    if (fd > from) ::close_range(from, fd - 1, 0);
    from = fd + 1;
  }
  ::close_range(from, ~0u, 0);
}

// Replaces the command line this copy of the runtime inherited (host paths, flags) with
// "flotilla-init": overwrites the argv area named by /proc/self/stat fields 48-49.
// The argv area (/proc/self/stat fields 48-49), found once by the zygote: every init is a
// clone of it, with the same addresses.
char* g_argv_start = nullptr;
char* g_argv_end = nullptr;

void FindCommandLine() {
  static char stat[4096];
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = ::read(fd, stat, sizeof(stat) - 1);
  ::close(fd);
  if (n <= 0) return;
  stat[n] = '\0';
  char* p = std::strrchr(stat, ')');
  if (p == nullptr) return;
  unsigned long fields[47] = {};
  int idx = 0;  // token 0 is field 3 (state)
  for (p += 2; *p && idx < 47; ++idx) {
    unsigned long v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + static_cast<unsigned long>(*p++ - '0');
    fields[idx] = v;
    while (*p && *p != ' ') ++p;
    if (*p == ' ') ++p;
  }
  if (idx < 47) return;
  g_argv_start = reinterpret_cast<char*>(fields[45]);
  g_argv_end = reinterpret_cast<char*>(fields[46]);
}

void HideCommandLine() {
  static const char kName[] = "flotilla-init";
  (void)::prctl(PR_SET_NAME, reinterpret_cast<unsigned long>(kName), 0, 0, 0);
  if (g_argv_start == nullptr) FindCommandLine();  // a zygote that did not look
  char* start = g_argv_start;
  char* end = g_argv_end;
  if (start == nullptr || end <= start) return;
  std::memset(start, 0, static_cast<size_t>(end - start));
  size_t len = std::min(sizeof(kName), static_cast<size_t>(end - start));
  std::memcpy(start, kName, len);
  end[-1] = '\0';
}

// Mount data with its layer marks (InitStep::kLayerFdMark) replaced by /proc/self/fd/<n>,
// in a static buffer. Null when a mark names no layer or the result does not fit.
const char* ExpandLayerFds(const InitPlanView& p, const char* data) {
  static char out[64 * 1024];
  size_t n = 0;
  auto put = [&](char c) {
    if (n + 1 >= sizeof(out)) return false;
    out[n++] = c;
    return true;
  };
  for (const char* s = data; *s; ++s) {
    if (*s != InitStep::kLayerFdMark) {
      if (!put(*s)) return nullptr;
      continue;
    }
    const int i = static_cast<unsigned char>(*++s) - 1;
    if (i < 0 || i >= p.layer_fd_count()) return nullptr;
    for (const char* q = "/proc/self/fd/"; *q; ++q) {
      if (!put(*q)) return nullptr;
    }
    char digits[12];
    int k = 0;
    for (unsigned v = static_cast<unsigned>(p.layer_fd(i)); k == 0 || v != 0; v /= 10) digits[k++] = static_cast<char>('0' + v % 10);
    while (k > 0) {
      if (!put(digits[--k])) return nullptr;
    }
  }
  out[n] = '\0';
  return out;
}

void SetUp(const InitPlanView& p) {
  const int ctl = p.control_fd();
  CloseInherited(p);
  char zero[] = "0";
  const char* procs = p.first_cgroup_proc();
  for (uint32_t i = 0; i < p.cgroup_proc_count(); ++i, procs += std::strlen(procs) + 1) {
    int fd = ::open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, zero, 1) != 1) Fail(ctl, "join cgroup", errno);
    ::close(fd);
  }
  if (::unshare(CLONE_NEWCGROUP) != 0) Fail(ctl, "unshare cgroup namespace", errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Fail(ctl, "make / private", errno);
  if (::move_mount(p.tmpfs_fd(), "", AT_FDCWD, p.rw_dir(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    Fail(ctl, "attach writable layer", errno);
  }
  // tmpfs_fd stays open: the runtime reaches the writable layer through /proc/1/fd of init.
  for (uint32_t i = 0; i < p.step_count(); ++i) {
    const InitPlanWireStep m = p.step(i);
    const char* source = p.At(m.source);
    const char* target = p.At(m.target);
    const char* fstype = p.At(m.fstype);
    const char* data = p.At(m.data);
    int rc = 0;
    switch (static_cast<InitStep::Kind>(m.kind)) {
      case InitStep::Kind::kMount:
        if (std::strchr(data, InitStep::kLayerFdMark) != nullptr) {
          data = ExpandLayerFds(p, data);
          if (data == nullptr) Fail(ctl, target, EINVAL);
        }
        rc = ::mount(*source ? source : nullptr, target, *fstype ? fstype : nullptr, m.flags, *data ? data : nullptr);
        break;
      case InitStep::Kind::kMkdir:
        rc = ::mkdir(target, m.mode);
        if (rc != 0 && errno == EEXIST) rc = 0;
        if (rc == 0) rc = ::chmod(target, m.mode);
        break;
      case InitStep::Kind::kMknod:
        rc = ::mknod(target, m.mode, m.dev);
        if (rc == 0) rc = ::chmod(target, m.mode & 07777);
        break;
      case InitStep::Kind::kSymlink:
        rc = ::symlink(source, target);
        break;
    }
    if (rc != 0 && !m.optional) Fail(ctl, target, errno);
  }
  // The overlays hold their lower layers now.
  for (int i = 0; i < p.layer_fd_count(); ++i) ::close(p.layer_fd(i));
  if (*p.hostname() && ::sethostname(p.hostname(), std::strlen(p.hostname())) != 0) Fail(ctl, "sethostname", errno);
  BringLoopbackUp();
  if (::chdir(p.root_dir()) != 0) Fail(ctl, "chdir root", errno);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) Fail(ctl, "pivot_root", errno);
  if (::umount2(".", MNT_DETACH) != 0) Fail(ctl, "detach old root", errno);
  if (::chdir("/") != 0) Fail(ctl, "chdir /", errno);
  if (int err = p.RunHooks(0); err != 0) Fail(ctl, "enforcer", err);
  HideCommandLine();
  // Opened while init is still the host's root: after the switch below init is non-dumpable
  // and could not open its own /proc files any more.
  g_oom_adj_fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (::setns(p.userns_fd(), CLONE_NEWUSER) != 0) Fail(ctl, "enter user namespace", errno);
  ::close(p.userns_fd());
  // Raw system calls: glibc's wrappers broadcast to every thread it believes exists, and the
  // threads of the runtime process this child was cloned from do not exist here.
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) Fail(ctl, "setgroups", errno);
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0) Fail(ctl, "setresgid", errno);
  if (::syscall(SYS_setresuid, 0, 0, 0) != 0) Fail(ctl, "setresuid", errno);
  if (int err = SetCapabilities(p.keep_caps()); err != 0) Fail(ctl, "capabilities", err);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(ctl, "no_new_privs", errno);
  // Credentials changed: set these only now (a credential change clears the death signal).
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (p.sched_idle()) {
    struct sched_param sp {};
    if (::sched_setscheduler(0, SCHED_IDLE, &sp) != 0) Fail(ctl, "SCHED_IDLE", errno);
  }
  if (p.core_sched()) (void)::prctl(PR_SCHED_CORE, PR_SCHED_CORE_CREATE, 0, PR_SCHED_CORE_SCOPE_THREAD_GROUP, 0);
  if (int err = p.RunHooks(1); err != 0) Fail(ctl, "enforcer", err);
}

struct ExecSlot {
  pid_t pid = 0;
  uint32_t exec_id = 0;
  int status_fd = -1;
};

// Static: init never allocates after clone.
ExecSlot g_slots[kInitMaxExecs];
char g_msg[kInitMaxMessage];
char* g_ptrs[kInitMaxArgs + 2];

struct ExecArgs {
  const InitHeader* h;
  char* payload;
  const int* fds;
  const sigset_t* mask;
};

// execve with a PATH search over the environment the exec was given (execvp would read init's
// own environment).
void ExecSearchingPath(char** argv, char** envp) {
  if (std::strchr(argv[0], '/') != nullptr) {
    ::execve(argv[0], argv, envp);
    return;
  }
  const char* path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (char** e = envp; *e; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  static char candidate[4096];
  int first_err = ENOENT;
  const size_t name_len = std::strlen(argv[0]);
  for (const char* p = path;; ++p) {
    const char* end = std::strchr(p, ':');
    size_t dir_len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (dir_len + name_len + 2 < sizeof(candidate)) {
      std::memcpy(candidate, p, dir_len);
      size_t n = dir_len;
      if (n == 0) candidate[n++] = '.';
      candidate[n++] = '/';
      std::memcpy(candidate + n, argv[0], name_len + 1);
      ::execve(candidate, argv, envp);
      if (errno != ENOENT && errno != ENOTDIR) first_err = errno;
    }
    if (end == nullptr) break;
    p = end;
  }
  errno = first_err;
}

// The exec child: runs on its own stack in init's memory while init waits (CLONE_VFORK), so it
// must not return into init's frames; it ends in execve or _exit.
int StartExec(void* raw) {
  const ExecArgs& a = *static_cast<ExecArgs*>(raw);
  ::setsid();
  for (int i = 0; i < 3; ++i) {
    if (::dup2(a.fds[i], i) < 0) ::_exit(126);
  }
  ::close_range(3, ~0u, 0);
  ::sigprocmask(SIG_SETMASK, a.mask, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  char* end = a.payload + a.h->payload_len;
  char* cwd = a.payload;
  char* q = cwd + std::strlen(cwd) + 1;
  uint32_t argc = a.h->argc, envc = a.h->envc;
  if (argc == 0 || argc + envc + 2 > kInitMaxArgs) ::_exit(126);
  char** argv = g_ptrs;
  for (uint32_t i = 0; i < argc && q < end; ++i, q += std::strlen(q) + 1) argv[i] = q;
  argv[argc] = nullptr;
  char** envp = g_ptrs + argc + 1;
  for (uint32_t i = 0; i < envc && q < end; ++i, q += std::strlen(q) + 1) envp[i] = q;
  envp[envc] = nullptr;
  if (::chdir(*cwd ? cwd : "/") != 0) {
    const char msg[] = "flotilla: cannot enter the working directory\n";
    (void)WriteAll(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ExecSearchingPath(argv, envp);
  int err = errno;
  const char pre[] = "flotilla: cannot execute ";
  (void)WriteAll(2, pre, sizeof(pre) - 1);
  (void)WriteAll(2, argv[0], std::strlen(argv[0]));
  (void)WriteAll(2, ": ", 2);
  const char* d = strerrordesc_np(err);
  if (d) (void)WriteAll(2, d, std::strlen(d));
  (void)WriteAll(2, "\n", 1);
  ::_exit(err == ENOENT ? 127 : 126);
}

alignas(64) char g_exec_stack[64 * 1024];

void HandleMessage(int ctl, const sigset_t& old_mask) {
  int fds[kInitExecFds] = {-1, -1, -1, -1};
  int nfds = 0;
  bool truncated = false;
  ssize_t n = RecvWithFds(ctl, g_msg, sizeof(g_msg), fds, kInitExecFds, &nfds, &truncated);
  if (n == 0) ::_exit(0);  // the runtime closed the channel: the sandbox ends
  if (n < 0) {
    if (errno == EAGAIN) return;
    ::_exit(0);
  }
  auto close_fds = [&] {
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
  };
  if (static_cast<size_t>(n) < sizeof(InitHeader)) {
    close_fds();
    return;
  }
  InitHeader h;
  std::memcpy(&h, g_msg, sizeof(h));
  if (h.type == InitMsg::kKill) {
    for (ExecSlot& s : g_slots) {
      if (s.pid > 0 && s.exec_id == h.exec_id) {
        ::kill(-s.pid, h.arg);
        ::kill(s.pid, h.arg);
      }
    }
    close_fds();
    return;
  }
  if (h.type != InitMsg::kExec || nfds != kInitExecFds || sizeof(h) + h.payload_len > static_cast<size_t>(n)) {
    close_fds();
    return;
  }
  ExecSlot* slot = nullptr;
  for (ExecSlot& s : g_slots) {
    if (s.pid == 0) {
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) {  // too many concurrent execs: report as a failed start
    int status = 126 << 8;
    (void)WriteAll(fds[3], reinterpret_cast<const char*>(&status), sizeof(status));
    close_fds();
    return;
  }
  g_msg[sizeof(h) + h.payload_len] = '\0';
  // vfork-style: the child borrows init's memory until it execs, so nothing is copied.
  ExecArgs args{&h, g_msg + sizeof(h), fds, &old_mask};
  // Raising one's own bias needs no privilege, and a child inherits it: raised for the clone,
  // back to 0 once the child has exec'd (CLONE_VFORK).
  SetOwnOomScoreAdj(kCommandOomScoreAdj);
  pid_t pid = ::clone(&StartExec, g_exec_stack + sizeof(g_exec_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  SetOwnOomScoreAdj("0");
  if (pid < 0) {
    int status = 126 << 8;
    (void)WriteAll(fds[3], reinterpret_cast<const char*>(&status), sizeof(status));
    close_fds();
    return;
  }
  slot->pid = pid;
  slot->exec_id = h.exec_id;
  slot->status_fd = fds[3];
  for (int i = 0; i < 3; ++i) ::close(fds[i]);
}

void Reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (ExecSlot& s : g_slots) {
      if (s.pid == pid) {
        (void)WriteAll(s.status_fd, reinterpret_cast<const char*>(&status), sizeof(status));
        ::close(s.status_fd);
        s = ExecSlot{};
      }
    }
  }
}

}  // namespace

void PrepareInitsInZygote() { FindCommandLine(); }

uint64_t DefaultKeptCapabilities() {
  uint64_t m = 0;
  for (int c : {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP,
                CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETFCAP}) {
    m |= 1ull << c;
  }
  return m;
}

void BringLoopbackUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    (void)::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  ::close(s);
}

void RunInit(const InitPlanView& plan) {
  SetUp(plan);
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  sigemptyset(&old_mask);  // execs start with no signal blocked
  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) Fail(plan.control_fd(), "signalfd", errno);
  ::signal(SIGPIPE, SIG_IGN);
  InitHeader ready{};
  ready.type = InitMsg::kReady;
  if (::send(plan.control_fd(), &ready, sizeof(ready), MSG_NOSIGNAL) != sizeof(ready)) ::_exit(1);
  struct pollfd pfd[2] = {{plan.control_fd(), POLLIN, 0}, {sfd, POLLIN, 0}};
  for (;;) {
    if (::poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    if (pfd[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(sfd, &si, sizeof(si)) == sizeof(si)) {
      }
      Reap();
    }
    if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) HandleMessage(plan.control_fd(), old_mask);
  }
}

}  // namespace flotilla::sandbox
