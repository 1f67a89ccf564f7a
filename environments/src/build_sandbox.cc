#include "build_sandbox.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "mirror_proxy.h"

namespace flotilla::environments {
namespace {

constexpr size_t kTailBytes = 8192;
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Drops root for a USER step: setpriv (util-linux, in every Debian) to the user's uid, its
// group (or the one named) and its supplementary groups, with HOME from the passwd entry.
constexpr const char* kAsUser = R"SH(u=$1 g=$2; shift 2
groups=--init-groups
if ! getent passwd "$u" >/dev/null; then
  case "$u" in *[!0-9]*) echo "USER $u: no such user in the image" >&2; exit 125 ;; esac
  groups=--clear-groups
fi
if [ -z "$g" ]; then g=$(id -g "$u" 2>/dev/null || echo "$u"); fi
h=$(getent passwd "$u" | cut -d: -f6)
if [ -n "$h" ]; then export HOME="$h"; fi
exec setpriv --reuid="$u" --regid="$g" $groups -- "$@")SH";

bool IsRoot(const std::string& user) {
  return user.empty() || user == "root" || user == "0" || user == "root:root" || user == "0:0";
}

}  // namespace

absl::StatusOr<std::unique_ptr<BuildSandbox>> BuildSandbox::Start(sandbox::Runtime& runtime, const std::string& top,
                                                                  std::set<std::string> mirror_hosts,
                                                                  sandbox::ExecutionClass execution_class) {
  sandbox::SandboxOptions o;
  o.execution_class = execution_class;
  o.image = top.rfind("dir:", 0) == 0 ? top.substr(4) : top;
  o.policy_name = "build";
  o.labels["role"] = "env-build";
  o.extra_allow.push_back({.cidr = "127.0.0.1/32", .port = 0});  // the mirror proxy
  ASSIGN_OR_RETURN(sandbox::CreateResult c, runtime.Create(o));
  std::unique_ptr<BuildSandbox> b(new BuildSandbox(runtime, c.id));
  b->mirror_hosts_ = std::move(mirror_hosts);
  return b;
}

BuildSandbox::~BuildSandbox() { (void)runtime_.Destroy(id_); }

absl::StatusOr<StepOutput> BuildSandbox::Run(const std::vector<std::string>& argv_in,
                                             const std::map<std::string, std::string>& env, const std::string& cwd,
                                             const std::string& user,
                                             const std::function<void(std::string_view)>& progress,
                                             bool with_mirrors) {
  std::unique_ptr<MirrorProxy> proxy;
  std::map<std::string, std::string> exec_env = env;
  if (with_mirrors && !mirror_hosts_.empty()) {
    ASSIGN_OR_RETURN(int netns, runtime_.OpenNetworkNamespace(id_));
    auto started = MirrorProxy::Start(netns, mirror_hosts_);
    ::close(netns);
    if (!started.ok()) return Annotate(started.status(), "starting the apt mirror proxy");
    proxy = std::move(*started);
    std::string url = absl::StrCat("http://127.0.0.1:", proxy->port());
    for (const char* k : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) exec_env[k] = url;
  }
  std::vector<std::string> argv = argv_in;
  if (!IsRoot(user)) {
    std::string u = user.substr(0, user.find(':'));
    std::string g = user.find(':') == std::string::npos ? "" : user.substr(user.find(':') + 1);
    argv = {"/bin/sh", "-c", kAsUser, "flotilla-user", u, g};
    argv.insert(argv.end(), argv_in.begin(), argv_in.end());
  }
  sandbox::ExecOptions ex;
  ex.argv = argv;
  ex.env = exec_env;
  ex.cwd = cwd.empty() ? "/" : cwd;
  StepOutput out;
  std::string pending;
  auto r = runtime_.Exec(id_, ex, [&](sandbox::OutputStream, std::string_view d) {
    out.tail.append(d);
    if (out.tail.size() > 2 * kTailBytes) out.tail.erase(0, out.tail.size() - kTailBytes);
    if (!progress) return;
    pending.append(d);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      progress(std::string_view(pending).substr(0, nl));
      pending.erase(0, nl + 1);
    }
  });
  if (progress && !pending.empty()) progress(pending);
  if (out.tail.size() > kTailBytes) out.tail.erase(0, out.tail.size() - kTailBytes);
  if (!r.ok()) return r.status();
  out.exit_code = r->exit_code;
  if (r->reason != sandbox::StopReason::kNone) {
    out.reason = absl::StrCat(std::string(sandbox::StopReasonName(r->reason)), r->detail.empty() ? "" : ": ", r->detail);
  }
  return out;
}

absl::StatusOr<std::string> BuildSandbox::Shell(const std::string& script, const std::string& stdin_data) {
  sandbox::ExecOptions ex;
  ex.argv = {"/bin/sh", "-c", script};
  ex.env = {{"PATH", kDefaultPath}, {"HOME", "/root"}};
  ex.stdin_data = stdin_data;
  ex.output_limit_bytes = 4ull << 30;
  std::string out, err;
  ASSIGN_OR_RETURN(sandbox::ExecResult r, runtime_.Exec(id_, ex, [&](sandbox::OutputStream s, std::string_view d) {
                     (s == sandbox::OutputStream::kStdout ? out : err).append(d);
                   }));
  if (r.exit_code != 0 || r.reason != sandbox::StopReason::kNone) {
    return absl::InternalError(absl::StrCat("exited with status ", r.exit_code,
                                            r.reason != sandbox::StopReason::kNone
                                                ? absl::StrCat(" (", std::string(sandbox::StopReasonName(r.reason)), ")")
                                                : "",
                                            err.empty() ? "" : ": ", err.substr(0, 2000)));
  }
  return out;
}

absl::Status BuildSandbox::Put(const std::string& path, const std::string& content, uint32_t mode) {
  return runtime_.PutFile(id_, path, content, mode);
}

absl::StatusOr<sandbox::SnapshotResult> BuildSandbox::Commit() { return runtime_.Snapshot(id_, ""); }

}  // namespace flotilla::environments
