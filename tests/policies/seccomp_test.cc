// Seccomp filters compiled from policies, loaded in forked children, violations counted.
#include "flotilla/policies/seccomp.h"

#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "gtest/gtest.h"

namespace flotilla::policies {
namespace {

// The calls a child makes, and the errno each must see (0 = must succeed).
enum Probe { kMount, kKeyctl, kBpf, kUnshareUser, kPtrace, kGetpid, kUnshareFiles, kClone3,
             kPersonalityLinux32, kPersonalityBad, kTiocsti, kProbeCount };

// Runs in the child: only async-signal-safe calls. The targets are chosen so that, without
// the filter, each call would fail differently (ENOENT, ESRCH, EFAULT) instead of harming the
// host: only EPERM proves the filter.
void RunProbes(int out_fd) {
  std::array<int, kProbeCount> err{};
  auto call = [&](Probe p, long rc) { err[p] = rc < 0 ? errno : 0; };
  call(kMount, mount("none", "/nonexistent-flotilla-mountpoint", "tmpfs", 0, nullptr));
  call(kKeyctl, syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  call(kBpf, syscall(SYS_bpf, 0, nullptr, 0));
  call(kUnshareUser, unshare(CLONE_NEWUSER));
  call(kPtrace, ptrace(PTRACE_ATTACH, 0x3ffffff0, nullptr, nullptr));
  call(kGetpid, syscall(SYS_getpid));
  call(kUnshareFiles, unshare(CLONE_FILES));
  clone_args args{};
  args.exit_signal = SIGCHLD;
  call(kClone3, syscall(SYS_clone3, &args, sizeof(args)));
  if (err[kClone3] == 0) _exit(0);  // must not happen; a clone3 child leaves at once
  call(kPersonalityLinux32, personality(PER_LINUX32));
  call(kPersonalityBad, personality(READ_IMPLIES_EXEC));
  char c = 'x';
  int tty = open("/dev/ptmx", O_RDWR | O_NOCTTY);
  call(kTiocsti, tty < 0 ? 0 : ioctl(tty, TIOCSTI, &c));
  (void)!write(out_fd, err.data(), sizeof(err));
}

struct ChildResult {
  std::array<int, kProbeCount> err{};
  int status = -1;
};

// Forks a child that installs `program` and runs the probes; the watch (if any) counts.
ChildResult RunChild(const SeccompProgram& program, SeccompSupervisor* supervisor,
                     std::unique_ptr<SeccompWatch>* watch) {
  int sv[2];
  int pipefd[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  EXPECT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    close(pipefd[0]);
    if (InstallSeccompInChild(program, sv[1]) != 0) _exit(90);
    RunProbes(pipefd[1]);
    _exit(0);
  }
  close(sv[1]);
  close(pipefd[1]);
  if (program.uses_notify()) {
    auto fd = ReceiveListenerFd(sv[0]);
    EXPECT_TRUE(fd.ok()) << fd.status();
    auto w = supervisor->Watch("sbx-test", std::move(*fd));
    EXPECT_TRUE(w.ok()) << w.status();
    *watch = std::move(*w);
  }
  ChildResult r;
  EXPECT_EQ(read(pipefd[0], r.err.data(), sizeof(r.err)), static_cast<ssize_t>(sizeof(r.err)));
  waitpid(pid, &r.status, 0);
  close(sv[0]);
  close(pipefd[0]);
  return r;
}

SyscallPolicy DefaultSyscalls() {
  SyscallPolicy sc;
  sc.deny = DockerDefaultDenyList();
  return sc;
}

TEST(SeccompTest, DeniedCallsGetEpermAndAreCounted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (mount/bpf must fail only because of the filter)";
  auto program = CompileSeccomp(DefaultSyscalls());
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_TRUE((*program)->uses_notify());
  auto supervisor = SeccompSupervisor::Start();
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  std::unique_ptr<SeccompWatch> watch;
  ChildResult r = RunChild(**program, supervisor->get(), &watch);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status;
  EXPECT_EQ(r.err[kMount], EPERM);
  EXPECT_EQ(r.err[kKeyctl], EPERM);
  EXPECT_EQ(r.err[kBpf], EPERM);
  EXPECT_EQ(r.err[kUnshareUser], EPERM);
  EXPECT_EQ(r.err[kPtrace], EPERM);
  EXPECT_EQ(r.err[kGetpid], 0);
  EXPECT_EQ(r.err[kUnshareFiles], 0);
  EXPECT_EQ(r.err[kClone3], ENOSYS);
  EXPECT_EQ(r.err[kPersonalityLinux32], 0);
  EXPECT_EQ(r.err[kPersonalityBad], EPERM);
  EXPECT_EQ(r.err[kTiocsti], EPERM);
  ASSERT_NE(watch, nullptr);
  // mount, keyctl, bpf, unshare(NEWUSER), ptrace, personality, TIOCSTI; clone3 is not counted.
  EXPECT_EQ(watch->violations(), 7u);
  EXPECT_EQ(watch->last_syscall(), SYS_ioctl);
  EXPECT_EQ((*supervisor)->total_violations(), 7u);
  watch.reset();
}

// Forks a child that installs `program` and makes `denied_calls` bpf() calls; returns its pid
// and hands its listener to `supervisor` as `id`.
pid_t StartBpfCaller(const SeccompProgram& program, int denied_calls, SeccompSupervisor* supervisor,
                     const std::string& id, std::unique_ptr<SeccompWatch>* watch) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    if (InstallSeccompInChild(program, sv[1]) != 0) _exit(90);
    for (int i = 0; i < denied_calls; ++i) {
      if (syscall(SYS_bpf, 0, nullptr, 0) != -1 || errno != EPERM) _exit(91);
    }
    _exit(0);
  }
  close(sv[1]);
  auto fd = ReceiveListenerFd(sv[0]);
  close(sv[0]);
  EXPECT_TRUE(fd.ok()) << fd.status();
  auto w = supervisor->Watch(id, std::move(*fd));
  EXPECT_TRUE(w.ok()) << w.status();
  *watch = std::move(*w);
  return pid;
}

TEST(SeccompTest, EachSandboxHasItsOwnCounter) {
  auto program = CompileSeccomp(DefaultSyscalls());
  ASSERT_TRUE(program.ok()) << program.status();
  auto supervisor = SeccompSupervisor::Start();
  ASSERT_TRUE(supervisor.ok());
  std::unique_ptr<SeccompWatch> a;
  std::unique_ptr<SeccompWatch> b;
  pid_t pa = StartBpfCaller(**program, 3, supervisor->get(), "sbx-a", &a);
  pid_t pb = StartBpfCaller(**program, 1, supervisor->get(), "sbx-b", &b);
  int status_a = 0;
  int status_b = 0;
  waitpid(pa, &status_a, 0);
  waitpid(pb, &status_b, 0);
  EXPECT_TRUE(WIFEXITED(status_a) && WEXITSTATUS(status_a) == 0) << status_a;
  EXPECT_TRUE(WIFEXITED(status_b) && WEXITSTATUS(status_b) == 0) << status_b;
  EXPECT_EQ(a->sandbox_id(), "sbx-a");
  EXPECT_EQ(a->violations(), 3u);
  EXPECT_EQ(b->violations(), 1u);
  EXPECT_EQ(a->last_syscall(), SYS_bpf);
  EXPECT_EQ((*supervisor)->total_violations(), 4u);
}

TEST(SeccompTest, WithoutASupervisorDeniedCallsFailWithEnosys) {
  auto program = CompileSeccomp(DefaultSyscalls());
  ASSERT_TRUE(program.ok());
  int sv[2];
  int out[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    close(out[0]);
    if (InstallSeccompInChild(**program, sv[1]) != 0) _exit(90);
    char go;
    (void)!read(sv[1], &go, 1);  // the parent has dropped the listener
    int err = syscall(SYS_bpf, 0, nullptr, 0) == -1 ? errno : 0;
    (void)!write(out[1], &err, sizeof(err));
    _exit(0);
  }
  close(sv[1]);
  close(out[1]);
  auto fd = ReceiveListenerFd(sv[0]);
  ASSERT_TRUE(fd.ok());
  fd->Reset();
  ASSERT_EQ(write(sv[0], "g", 1), 1);
  int err = -1;
  EXPECT_EQ(read(out[0], &err, sizeof(err)), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err, ENOSYS);
  waitpid(pid, nullptr, 0);
  close(sv[0]);
  close(out[0]);
}

TEST(SeccompTest, WithoutCountingDeniedCallsStillGetEperm) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (mount/bpf must fail only because of the filter)";
  auto program = CompileSeccomp(DefaultSyscalls(), SeccompOptions{.count_violations = false});
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE((*program)->uses_notify());
  ChildResult r = RunChild(**program, nullptr, nullptr);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status;
  EXPECT_EQ(r.err[kMount], EPERM);
  EXPECT_EQ(r.err[kBpf], EPERM);
  EXPECT_EQ(r.err[kUnshareUser], EPERM);
  EXPECT_EQ(r.err[kGetpid], 0);
}

TEST(SeccompTest, AllowListRemovesASyscallFromTheBase) {
  SyscallPolicy sc = DefaultSyscalls();
  sc.deny.erase(std::find(sc.deny.begin(), sc.deny.end(), "keyctl"));
  auto program = CompileSeccomp(sc);
  ASSERT_TRUE(program.ok()) << program.status();
  auto supervisor = SeccompSupervisor::Start();
  ASSERT_TRUE(supervisor.ok());
  std::unique_ptr<SeccompWatch> watch;
  ChildResult r = RunChild(**program, supervisor->get(), &watch);
  EXPECT_EQ(r.err[kKeyctl], 0);
  EXPECT_EQ(r.err[kBpf], EPERM);
}

TEST(SeccompTest, UnknownSyscallIsInvalidArgument) {
  SyscallPolicy sc;
  sc.deny = {"mount", "no_such_call"};
  auto program = CompileSeccomp(sc);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program.status().message(), "unknown syscall 'no_such_call'");
}

TEST(SeccompTest, CompilerCachesOneProgramPerPolicy) {
  Policy a;
  a.syscalls = DefaultSyscalls();
  Policy b = a;
  b.name = "other-name-same-rules";
  auto pa = SeccompCompiler::Get(a);
  auto pb = SeccompCompiler::Get(b);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(pa->get(), pb->get());
  b.syscalls.deny.push_back("chroot");
  auto pc = SeccompCompiler::Get(b);
  ASSERT_TRUE(pc.ok());
  EXPECT_NE(pa->get(), pc->get());
  EXPECT_GT((*pc)->instructions().size(), (*pa)->instructions().size());
}

TEST(SeccompTest, ListenerHandOffFailsCleanlyWhenTheChildSendsNothing) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  close(sv[1]);
  auto fd = ReceiveListenerFd(sv[0]);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  close(sv[0]);
}

}  // namespace
}  // namespace flotilla::policies
