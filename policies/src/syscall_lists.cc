// The base syscall deny list, modelled on Docker's default seccomp profile: everything that
// profile refuses to an unprivileged container, by name. Argument-filtered calls (clone,
// clone3, unshare, personality, ioctl TIOCSTI) are handled by SyscallPolicy's flags.
#include "flotilla/policies/policy.h"

namespace flotilla::policies {

const std::vector<std::string>& DockerDefaultDenyList() {
  static const auto* const kList = new std::vector<std::string>{
      // filesystems and mounts
      "mount", "umount2", "pivot_root", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount",
      "open_tree", "mount_setattr", "swapon", "swapoff", "quotactl", "quotactl_fd",
      "open_by_handle_at", "name_to_handle_at", "nfsservctl", "uselib",
      // kernel code, modules, reboot
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
      "create_module", "get_kernel_syms", "query_module", "reboot", "bpf", "perf_event_open",
      "lookup_dcookie", "syslog", "_sysctl", "acct", "vhangup",
      // keys
      "keyctl", "add_key", "request_key",
      // other processes
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "setns",
      // clocks
      "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
      // hardware and memory policy
      "iopl", "ioperm", "userfaultfd", "move_pages", "mbind", "set_mempolicy", "fanotify_init",
      // io_uring bypasses seccomp for the operations it performs
      "io_uring_setup", "io_uring_enter", "io_uring_register",
  };
  return *kList;
}

}  // namespace flotilla::policies
