#include "flotilla/trainer_bridge/verifier.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr char kScriptPath[] = "/verify/check.sh";

// Fields are separated by the ASCII unit separator, not a tab: the shell's `read` merges runs
// of a whitespace separator, so an empty field (a copy task's reference) shifted the next
// ones and the response was read as empty.
constexpr char kSeparator = '\x1f';

std::string Clean(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r' || c == kSeparator) c = ' ';
  }
  return out;
}

}  // namespace

const std::string& VerifierScript() {
  static const std::string script = R"SH(#!/bin/sh
# Task-family verifier: reads "family<US>prompt<US>reference<US>response" lines (US: the ASCII
# unit separator, which unlike a tab keeps empty fields) and prints 1 (correct) or 0 per line.
# The truth is recomputed from the prompt; responses are compared as exact strings after
# trimming surrounding blanks.
sep=$(printf '\037')
while IFS="$sep" read -r family prompt ref resp; do
  resp=$(printf '%s' "$resp" | sed 's/^ *//; s/ *$//')
  case "$family" in
    arith)
      e=${prompt%=}
      case "$e" in ''|*[!0-9+*-]*) echo 0; continue ;; esac
      # In a subshell: a malformed expression ("1+", "08") fails this item, not the script.
      truth=$( (echo $(( $e ))) 2>/dev/null ) || { echo 0; continue; }
      ;;
    copy) truth=${prompt#copy } ;;
    file) truth=$ref ;;
    *) echo 0; continue ;;
  esac
  if [ "$resp" = "$truth" ]; then echo 1; else echo 0; fi
done
)SH";
  return script;
}

absl::StatusOr<std::unique_ptr<SandboxVerifier>> SandboxVerifier::Create(worker::SandboxClient& sandboxes,
                                                                         const std::string& policy_name) {
  std::unique_ptr<SandboxVerifier> v(new SandboxVerifier(sandboxes, policy_name));
  RETURN_IF_ERROR(v->Recreate());
  return v;
}

absl::Status SandboxVerifier::Recreate() {
  absl::MutexLock lock(&mu_);
  if (!sandbox_id_.empty()) (void)sandboxes_.Destroy(sandbox_id_);
  sandbox_id_.clear();
  v1::CreateRequest req;
  req.set_policy_name(policy_);
  req.set_execution_class(v1::LATENCY_SENSITIVE);
  (*req.mutable_labels())["role"] = "verifier";
  auto created = sandboxes_.Create(req);
  if (!created.ok()) return Annotate(created.status(), "creating the verifier sandbox");
  RETURN_IF_ERROR(Annotate(sandboxes_.PutFile(*created, kScriptPath, VerifierScript(), 0755),
                           "installing the verifier script"));
  sandbox_id_ = *created;
  FLOG(info, "verifier sandbox ready", {{"sandbox", sandbox_id_}});
  return absl::OkStatus();
}

std::string SandboxVerifier::sandbox_id() const {
  absl::MutexLock lock(&mu_);
  return sandbox_id_;
}

SandboxVerifier::~SandboxVerifier() {
  absl::MutexLock lock(&mu_);
  if (!sandbox_id_.empty()) (void)sandboxes_.Destroy(sandbox_id_);
}

absl::StatusOr<std::vector<double>> SandboxVerifier::RunOnce(const std::string& id, const std::string& input, size_t n) {
  v1::ExecRequest ex;
  ex.set_sandbox_id(id);
  ex.add_argv("/bin/sh");
  ex.add_argv(kScriptPath);
  ex.set_stdin(input);
  ex.set_timeout_ms(30000);
  ex.set_output_limit_bytes(1 << 20);
  std::string out;
  auto r = sandboxes_.Exec(ex, [&](std::string_view d) { out.append(d); });
  if (!r.ok()) return r.status();
  execs_.fetch_add(1);
  if (r->reason != v1::STOP_REASON_NONE || r->exit_code != 0) {
    return absl::InternalError(absl::StrCat("verifier exited with ", r->exit_code, " (",
                                            v1::StopReason_Name(r->reason), " ", r->detail, "): ", r->output));
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (lines.size() != n) {
    return absl::InternalError(absl::StrCat("verifier printed ", lines.size(), " verdicts for ", n, " items: ", r->output));
  }
  std::vector<double> rewards;
  for (const auto& l : lines) rewards.push_back(l == "1" ? 1.0 : 0.0);
  return rewards;
}

absl::StatusOr<std::vector<double>> SandboxVerifier::Verify(const std::vector<VerifyItem>& items) {
  if (items.empty()) return std::vector<double>{};
  std::string input;
  for (const auto& it : items) {
    absl::StrAppend(&input, Clean(it.family), std::string(1, kSeparator), Clean(it.prompt),
                    std::string(1, kSeparator), Clean(it.reference), std::string(1, kSeparator),
                    Clean(it.response), "\n");
  }
  auto r = RunOnce(sandbox_id(), input, items.size());
  if (r.ok()) return r;
  FLOG(warn, "verifier sandbox failed; replacing it", {{"error", r.status().ToString()}});
  RETURN_IF_ERROR(Recreate());
  return RunOnce(sandbox_id(), input, items.size());
}

}  // namespace flotilla::trainer_bridge
