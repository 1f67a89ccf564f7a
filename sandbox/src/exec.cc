// Runtime::Exec: hands a command to the sandbox's init and streams its output back.
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/poll.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/fd_passing.h"
#include "flotilla/common/status.h"
#include "init_protocol.h"
#include "runtime_impl.h"

namespace flotilla::sandbox {
namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

absl::Status SendToInit(int control, const InitHeader& h, const std::string& payload, const int* fds, int nfds) {
  struct iovec iov[2] = {{const_cast<InitHeader*>(&h), sizeof(h)},
                         {const_cast<char*>(payload.data()), payload.size()}};
  if (SendWithFds(control, iov, payload.empty() ? 1 : 2, fds, nfds) < 0) return ErrnoStatus("send to sandbox init");
  return absl::OkStatus();
}

bool MakePipe(UniqueFd* r, UniqueFd* w) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  r->Reset(p[0]);
  w->Reset(p[1]);
  return true;
}

}  // namespace

absl::StatusOr<ExecResult> RuntimeImpl::Exec(const std::string& id, const ExecOptions& options,
                                             const OutputCallback& on_output) {
  if (options.argv.empty() || options.argv[0].empty()) return absl::InvalidArgumentError("argv: empty command");
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  if (sb->paused) return absl::FailedPreconditionError("sandbox '" + id + "' is paused");
  // Payload: cwd, argv, env, NUL-separated.
  std::string payload = options.cwd.empty() ? "/" : options.cwd;
  payload.push_back('\0');
  for (const std::string& a : options.argv) {
    if (a.find('\0') != std::string::npos) return absl::InvalidArgumentError("argv: NUL byte in an argument");
    payload += a;
    payload.push_back('\0');
  }
  uint32_t envc = 0;
  auto add_env = [&](const std::string& k, const std::string& v) {
    payload += k + "=" + v;
    payload.push_back('\0');
    ++envc;
  };
  if (options.env.empty()) {
    add_env("PATH", kDefaultPath);
    add_env("HOME", "/root");
    add_env("TERM", "dumb");
  } else {
    for (const auto& [k, v] : options.env) {
      if (k.empty() || k.find_first_of("=\0") != std::string::npos) {
        return absl::InvalidArgumentError("env: bad variable name '" + k + "'");
      }
      add_env(k, v);
    }
    if (!options.env.count("PATH")) add_env("PATH", kDefaultPath);
  }
  if (payload.size() + sizeof(InitHeader) >= kInitMaxMessage || options.argv.size() + envc + 2 > kInitMaxArgs) {
    return absl::InvalidArgumentError("argv/env: too large (256 KiB, 8192 entries at most)");
  }
  uint32_t timeout_ms = options.timeout_ms ? options.timeout_ms : sb->policy.exec_timeout_ms;
  uint64_t limit = options.output_limit_bytes ? options.output_limit_bytes : sb->policy.output_limit_bytes;

  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w, st_r, st_w;
  if (!MakePipe(&in_r, &in_w) || !MakePipe(&out_r, &out_w) || !MakePipe(&err_r, &err_w) || !MakePipe(&st_r, &st_w)) {
    return ErrnoStatus("pipe");
  }
  for (int fd : {in_w.get(), out_r.get(), err_r.get(), st_r.get()}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  const CgroupCounters before = sb->cgroup->Counters();
  const uint64_t violations_before = sb->enforcement->Violations();
  Stopwatch watch;
  InitHeader h{};
  h.type = InitMsg::kExec;
  h.exec_id = sb->next_exec.fetch_add(1);
  h.argc = static_cast<uint32_t>(options.argv.size());
  h.envc = envc;
  h.payload_len = static_cast<uint32_t>(payload.size());
  int fds[kInitExecFds] = {in_r.get(), out_w.get(), err_w.get(), st_w.get()};
  absl::Status sent = SendToInit(sb->control.get(), h, payload, fds, kInitExecFds);
  in_r.Reset();
  out_w.Reset();
  err_w.Reset();
  st_w.Reset();
  if (!sent.ok()) {
    ExecResult r;
    r.reason = sb->destroying ? StopReason::kDestroyed : StopReason::kSandboxDied;
    r.detail = std::string(sent.message());
    return r;
  }

  ExecResult result;
  StopReason stopped = StopReason::kNone;
  size_t stdin_off = 0;
  if (options.stdin_data.empty()) in_w.Reset();
  uint64_t delivered = 0;
  bool have_status = false, init_gone = false;
  int wstatus = 0;
  char status_buf[sizeof(int)];
  size_t status_len = 0;
  const int64_t start_ms = watch.ElapsedNanos() / 1'000'000;
  int64_t kill_deadline_ms = -1;  // after we killed: give up waiting this long after
  auto kill_exec = [&](StopReason why) {
    if (stopped != StopReason::kNone) return;
    stopped = why;
    InitHeader k{};
    k.type = InitMsg::kKill;
    k.exec_id = h.exec_id;
    k.arg = SIGKILL;
    (void)SendToInit(sb->control.get(), k, "", nullptr, 0);
    kill_deadline_ms = static_cast<int64_t>(watch.ElapsedMillis()) + 1000;
  };
  char buf[65536];
  auto drain = [&](UniqueFd& fd, OutputStream stream, uint64_t* count) {
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) fd.Reset();
        return;
      }
      *count += static_cast<uint64_t>(n);
      size_t give = static_cast<size_t>(n);
      if (limit && delivered + give > limit) give = static_cast<size_t>(limit - std::min(limit, delivered));
      if (give && on_output) on_output(stream, std::string_view(buf, give));
      delivered += give;
      if (limit && result.stdout_bytes + result.stderr_bytes > limit) kill_exec(StopReason::kOutputLimit);
    }
  };
  while (!have_status && !init_gone) {
    struct pollfd pfd[4];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_st = -1, idx_in = -1;
    if (out_r.valid()) pfd[idx_out = n++] = {out_r.get(), POLLIN, 0};
    if (err_r.valid()) pfd[idx_err = n++] = {err_r.get(), POLLIN, 0};
    pfd[idx_st = n++] = {st_r.get(), POLLIN, 0};
    if (in_w.valid()) pfd[idx_in = n++] = {in_w.get(), POLLOUT, 0};
    int64_t now_ms = static_cast<int64_t>(watch.ElapsedMillis());
    int wait_ms = -1;
    if (timeout_ms && stopped == StopReason::kNone) wait_ms = static_cast<int>(std::max<int64_t>(0, start_ms + timeout_ms - now_ms));
    if (kill_deadline_ms >= 0) wait_ms = static_cast<int>(std::max<int64_t>(0, kill_deadline_ms - now_ms));
    int rc = ::poll(pfd, static_cast<nfds_t>(n), wait_ms);
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll exec");
    now_ms = static_cast<int64_t>(watch.ElapsedMillis());
    if (rc == 0) {
      if (kill_deadline_ms >= 0 && now_ms >= kill_deadline_ms) break;  // never hang the caller
      if (timeout_ms && now_ms >= start_ms + timeout_ms) kill_exec(StopReason::kTimeout);
      continue;
    }
    if (rc < 0) continue;
    if (idx_out >= 0 && pfd[idx_out].revents) drain(out_r, OutputStream::kStdout, &result.stdout_bytes);
    if (idx_err >= 0 && pfd[idx_err].revents) drain(err_r, OutputStream::kStderr, &result.stderr_bytes);
    if (idx_in >= 0 && (pfd[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_w.get(), options.stdin_data.data() + stdin_off, options.stdin_data.size() - stdin_off);
      if (w > 0) stdin_off += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdin_off >= options.stdin_data.size()) in_w.Reset();
    }
    if (pfd[idx_st].revents) {
      ssize_t r = ::read(st_r.get(), status_buf + status_len, sizeof(status_buf) - status_len);
      if (r > 0) status_len += static_cast<size_t>(r);
      if (status_len == sizeof(status_buf)) {
        std::memcpy(&wstatus, status_buf, sizeof(wstatus));
        have_status = true;
      } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        init_gone = true;
      }
    }
  }
  // What the process wrote before it exited is in the pipes now.
  if (out_r.valid()) drain(out_r, OutputStream::kStdout, &result.stdout_bytes);
  if (err_r.valid()) drain(err_r, OutputStream::kStderr, &result.stderr_bytes);
  result.wall_ms = watch.ElapsedMillis();
  if (have_status) {
    if (WIFEXITED(wstatus)) {
      result.exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      result.signal = WTERMSIG(wstatus);
    }
  }
  const CgroupCounters after = sb->cgroup->Counters();
  const bool failed = !have_status || result.exit_code != 0;
  if (init_gone || (!have_status && stopped == StopReason::kNone)) {
    std::unique_lock<std::mutex> lock(sb->mu);
    sb->cv.wait_for(lock, std::chrono::seconds(2), [&] { return sb->dead; });
    if (sb->destroying) {
      result.reason = StopReason::kDestroyed;
      result.detail = "the sandbox was destroyed";
    } else if (sb->timed_out) {
      result.reason = StopReason::kTimeout;
      result.detail = absl::StrCat("sandbox wall-clock limit of ", sb->limits.timeout_ms, " ms reached");
    } else if (sb->dead && sb->death_reason != StopReason::kSandboxDied) {
      result.reason = sb->death_reason;
      result.detail = sb->death_detail;
    } else {
      result.reason = after.oom_kills > before.oom_kills ? StopReason::kOom : StopReason::kSandboxDied;
      result.detail = "the sandbox's init died";
    }
  } else if (after.oom_kills > before.oom_kills && failed) {
    result.reason = StopReason::kOom;
    result.detail = absl::StrCat("memory limit of ", sb->limits.memory_bytes, " bytes reached");
  } else if (after.pids_max_hits > before.pids_max_hits) {
    result.reason = StopReason::kPids;
    result.detail = absl::StrCat("pids limit of ", sb->limits.pids, " reached");
  } else if (stopped == StopReason::kTimeout) {
    result.reason = stopped;
    result.detail = absl::StrCat("exec timeout of ", timeout_ms, " ms reached");
  } else if (stopped == StopReason::kOutputLimit) {
    result.reason = stopped;
    result.detail = absl::StrCat("output limit of ", limit, " bytes reached");
  } else if (failed) {
    struct statfs fs;
    UniqueFd layer(sb->OpenLayer());
    if (layer.valid() && ::fstatfs(layer.get(), &fs) == 0 && fs.f_bavail == 0) {
      result.reason = StopReason::kDiskFull;
      result.detail = absl::StrCat("writable layer of ", sb->limits.disk_bytes, " bytes is full");
    } else if (sb->enforcement->Violations() > violations_before) {
      result.reason = StopReason::kPolicy;
      result.detail = "a policy enforcer denied an operation";
    }
  }
  // A sandbox that removed its own shell is reported broken (once, as an event).
  UniqueFd root(have_status && !init_gone && !sb->timed_out && !sb->destroying ? sb->OpenRoot() : -1);
  if (root.valid()) {
    struct open_how how {};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    int fd = static_cast<int>(::syscall(SYS_openat2, root.get(), "/bin/sh", &how, sizeof(how)));
    if (fd >= 0) {
      ::close(fd);
    } else if (errno == ENOENT || errno == ENOTDIR) {
      if (result.reason == StopReason::kNone) {
        result.reason = StopReason::kSandboxBroken;
        result.detail = "the sandbox has no /bin/sh any more";
      }
      if (!sb->broken.exchange(true)) {
        Emit(MakeEvent(id, SandboxEvent::Kind::kCrashed, StopReason::kSandboxBroken, "the sandbox has no /bin/sh any more"));
      }
    }
  }
  return result;
}

}  // namespace flotilla::sandbox
