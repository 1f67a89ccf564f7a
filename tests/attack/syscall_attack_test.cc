// Attacks through privileged system calls: each must be refused with the exact errno the
// default policy promises (seccomp EPERM; clone3 ENOSYS so callers fall back to clone), and
// the host and the bystander sandbox must be intact afterwards (checked in TearDown).
#include <unistd.h>

#include <string>
#include <vector>

#include "attack_fixture.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

struct SyscallCase {
  const char* name;
  std::string helper_args;  // after "/attack/helper "
  std::string expected;     // the helper's whole stdout
};

void PrintTo(const SyscallCase& c, std::ostream* os) { *os << c.name; }

std::vector<SyscallCase> Cases() {
  std::string self = std::to_string(::getpid());
  return {
      {"MountAndUmount", "mount",
       "mount_tmpfs errno=EPERM\nmount_proc errno=EPERM\nremount_root_rw errno=EPERM\numount_proc errno=EPERM\n"},
      {"PivotRoot", "pivot_root", "pivot_root errno=EPERM\n"},
      {"PtraceOfHostProcesses", "ptrace " + self + " 1",
       "ptrace_attach_" + self + " errno=EPERM\nptrace_seize_" + self + " errno=EPERM\n"
       "ptrace_attach_1 errno=EPERM\nptrace_seize_1 errno=EPERM\n"},
      {"KernelModuleLoad", "module",
       "init_module errno=EPERM\nfinit_module errno=EPERM\ndelete_module errno=EPERM\n"},
      {"Bpf", "bpf", "bpf_map_create errno=EPERM\nbpf_prog_load errno=EPERM\n"},
      {"PerfEventOpen", "perf", "perf_event_open_self errno=EPERM\nperf_event_open_cpu errno=EPERM\n"},
      {"Keyctl", "keyctl", "keyctl_join errno=EPERM\nadd_key errno=EPERM\nrequest_key errno=EPERM\n"},
      {"NestedUserNamespace", "userns",
       "unshare_user errno=EPERM\nunshare_mnt errno=EPERM\nclone_newuser errno=EPERM\n"
       "clone3_newuser errno=ENOSYS\nsetns_net errno=EPERM\n"},
      {"OpenByHandleAt", "handle", "open_by_handle_at errno=EPERM\n"},
  };
}

class SyscallAttackTest : public AttackTest, public ::testing::WithParamInterface<SyscallCase> {};

TEST_P(SyscallAttackTest, IsRefusedWithTheExactErrno) {
  const SyscallCase& c = GetParam();
  std::string modules_before = ReadHostFile("/proc/modules");
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  RunOutput r = Attack(id, std::string("exec ") + kHelperPath + " " + c.helper_args);
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.expected);
  // Nothing the attack tried is visible on the host: no module, no tracer on this process.
  EXPECT_EQ(ReadHostFile("/proc/modules"), modules_before);
  EXPECT_EQ(LinesStartingWith(ReadHostFile("/proc/self/status"), "TracerPid:"),
            std::vector<std::string>{"TracerPid:\t0"});
  // The sandbox itself still works after the refusals.
  RunOutput after = Exec(id, {"/bin/sh", "-c", "grep -c attack-mnt /proc/self/mountinfo; true"});
  ASSERT_TRUE(after.exec_ok) << after.error;
  EXPECT_EQ(after.out, "0\n");
}

INSTANTIATE_TEST_SUITE_P(Attacks, SyscallAttackTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<SyscallCase>& info) { return info.param.name; });

// The same attacks through the ordinary tools an agent would reach for.
TEST_F(AttackTest, NamespaceAndMountToolsFail) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id,
                       "mkdir -p /tmp/m\n"
                       "mount -t tmpfs none /tmp/m 2>/dev/null; echo mount=$?\n"
                       "umount -l /proc 2>/dev/null; echo umount=$?\n"
                       "unshare -U true 2>/dev/null; echo unshare_user=$?\n"
                       "unshare -m true 2>/dev/null; echo unshare_mnt=$?\n"
                       "nsenter -t 1 -n true 2>/dev/null; echo nsenter=$?\n");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out, "mount=32\numount=32\nunshare_user=1\nunshare_mnt=1\nnsenter=1\n");
}

// TIOCSTI pushes characters into a terminal's input queue: the classic way to type commands
// into the shell that started a container.
TEST_F(AttackTest, TiocstiIsRefused) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  RunOutput r = Attack(id, std::string("exec ") + kHelperPath + " tiocsti");
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> lines = LinesStartingWith(r.out, "tiocsti_");
  EXPECT_EQ(lines, (std::vector<std::string>{"tiocsti_fd0 errno=EPERM", "tiocsti_fd1 errno=EPERM",
                                             "tiocsti_fd2 errno=EPERM"}));
  // No terminal of the host is reachable from inside.
  EXPECT_EQ(LinesStartingWith(r.out, "open_dev_tty ok"), std::vector<std::string>{});
  EXPECT_EQ(LinesStartingWith(r.out, "tiocsti_console ok"), std::vector<std::string>{});
}

}  // namespace
}  // namespace flotilla::attack
