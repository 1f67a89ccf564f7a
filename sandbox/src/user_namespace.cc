#include "user_namespace.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "sys_util.h"

namespace flotilla::sandbox {

absl::StatusOr<UniqueFd> CreateUserNamespace(uint32_t base) {
  int ready[2], hold[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  if (::pipe2(hold, O_CLOEXEC) != 0) {
    ::close(ready[0]);
    ::close(ready[1]);
    return ErrnoStatus("pipe");
  }
  UniqueFd ready_r(ready[0]), ready_w(ready[1]), hold_r(hold[0]), hold_w(hold[1]);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    hold_w.Reset();
    ready_r.Reset();
    char c = ::unshare(CLONE_NEWUSER) == 0 ? 'k' : 'e';
    (void)!::write(ready_w.get(), &c, 1);
    (void)!::read(hold_r.get(), &c, 1);  // until the parent has opened the namespace
    ::_exit(0);
  }
  ready_w.Reset();
  hold_r.Reset();
  auto finish = [&] {
    hold_w.Reset();
    int st;
    ::waitpid(pid, &st, 0);
  };
  char c = 0;
  if (::read(ready_r.get(), &c, 1) != 1 || c != 'k') {
    finish();
    return absl::UnavailableError("this kernel does not allow creating a user namespace");
  }
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
