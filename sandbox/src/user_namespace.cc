#include "user_namespace.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "sys_util.h"

namespace flotilla::sandbox {

namespace {

// The holder: born in the new user namespace (clone with CLONE_NEWUSER), it only waits on the
// pipe until the runtime has written the id maps and opened the namespace, then exits. It
// shares the runtime's memory (CLONE_VM: nothing copied, whatever the runtime's size) and runs
// on a stack of its own, making raw system calls only.
struct HolderArgs {
  int hold_fd;   // read end: EOF once the runtime is done
  int other_fd;  // this copy of the write end, closed first (else EOF never comes)
};
alignas(64) char g_holder_stack[16 * 1024];

int HoldNamespace(void* raw) {
  const HolderArgs* a = static_cast<HolderArgs*>(raw);
  ::close(a->other_fd);
  char c;
  (void)!::read(a->hold_fd, &c, 1);
  ::_exit(0);
}

}  // namespace

absl::StatusOr<UniqueFd> CreateUserNamespace(uint32_t base) {
  int hold[2];
  if (::pipe2(hold, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd hold_r(hold[0]), hold_w(hold[1]);
  // One holder at a time uses the static stack (runtimes may open on several threads).
  static std::mutex holder_mu;
  std::lock_guard<std::mutex> lock(holder_mu);
  HolderArgs args{hold_r.get(), hold_w.get()};
  pid_t pid = ::clone(&HoldNamespace, g_holder_stack + sizeof(g_holder_stack), CLONE_NEWUSER | CLONE_VM | SIGCHLD,
                      &args);
  if (pid < 0) {
    if (errno == EPERM || errno == EINVAL || errno == ENOSPC) {
      return absl::UnavailableError(
          absl::StrCat("this kernel does not allow creating a user namespace: ", std::strerror(errno)));
    }
    return ErrnoStatus("clone a user namespace");
  }
  auto finish = [&] {
    hold_w.Reset();
    int st;
    while (::waitpid(pid, &st, __WALL) < 0 && errno == EINTR) {
    }
  };
  std::string map = absl::StrCat("0 ", base, " 65536\n");
  std::string proc = absl::StrCat("/proc/", pid);
  absl::Status s = WriteSmallFile(proc + "/uid_map", map);
  if (s.ok()) s = WriteSmallFile(proc + "/gid_map", map);
  UniqueFd ns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  if (s.ok() && !ns.valid()) s = ErrnoStatus("open " + proc + "/ns/user");
  finish();
  if (!s.ok()) return s;
  return ns;
}

}  // namespace flotilla::sandbox
