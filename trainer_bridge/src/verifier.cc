#include "flotilla/trainer_bridge/verifier.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/logging.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr char kScriptPath[] = "/verify/check.sh";

std::string Clean(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace

const std::string& VerifierScript() {
  static const std::string script = R"SH(#!/bin/sh
# Task-family verifier: reads "family<TAB>prompt<TAB>reference<TAB>response" lines and prints
# 1 (correct) or 0 per line. The truth is recomputed from the prompt; responses are compared
# as exact strings after trimming surrounding blanks.
tab=$(printf '\t')
while IFS="$tab" read -r family prompt ref resp; do
  resp=$(printf '%s' "$resp" | sed 's/^ *//; s/ *$//')
  case "$family" in
    arith)
      e=${prompt%=}
      case "$e" in ''|*[!0-9+*-]*) echo 0; continue ;; esac
      truth=$(( $e ))
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

absl::StatusOr<std::unique_ptr<SandboxVerifier>> SandboxVerifier::Create(
    std::shared_ptr<v1::NodeAgent::StubInterface> agent, const std::string& policy_name) {
  grpc::ClientContext cctx;
  v1::CreateRequest req;
  req.set_policy_name(policy_name);
  req.set_execution_class(v1::LATENCY_SENSITIVE);
  (*req.mutable_labels())["role"] = "verifier";
  v1::CreateResponse resp;
  if (auto s = FromGrpc(agent->Create(&cctx, req, &resp), "creating the verifier sandbox"); !s.ok()) return s;
  std::unique_ptr<SandboxVerifier> v(new SandboxVerifier(agent, resp.sandbox_id()));
  grpc::ClientContext pctx;
  v1::PutFileRequest put;
  put.set_sandbox_id(v->sandbox_id_);
  put.set_path(kScriptPath);
  put.set_content(VerifierScript());
  put.set_mode(0755);
  v1::PutFileResponse presp;
  if (auto s = FromGrpc(agent->PutFile(&pctx, put, &presp), "installing the verifier script"); !s.ok()) return s;
  FLOG(info, "verifier sandbox ready", {{"sandbox", v->sandbox_id_}});
  return v;
}

SandboxVerifier::~SandboxVerifier() {
  grpc::ClientContext ctx;
  v1::SandboxRef ref;
  ref.set_sandbox_id(sandbox_id_);
  v1::Empty out;
  (void)agent_->Destroy(&ctx, ref, &out);
}

absl::StatusOr<std::vector<double>> SandboxVerifier::Verify(const std::vector<VerifyItem>& items) {
  if (items.empty()) return std::vector<double>{};
  std::string input;
  for (const auto& it : items) {
    absl::StrAppend(&input, Clean(it.family), "\t", Clean(it.prompt), "\t", Clean(it.reference), "\t",
                    Clean(it.response), "\n");
  }
  grpc::ClientContext ctx;
  v1::ExecRequest req;
  req.set_sandbox_id(sandbox_id_);
  req.add_argv("/bin/sh");
  req.add_argv(kScriptPath);
  req.set_stdin(input);
  req.set_timeout_ms(30000);
  req.set_output_limit_bytes(1 << 20);
  auto reader = agent_->Exec(&ctx, req);
  std::string out, err;
  v1::ExecChunk chunk;
  v1::ExecExit exit;
  bool exited = false;
  while (reader->Read(&chunk)) {
    if (chunk.has_exit()) {
      exit = chunk.exit();
      exited = true;
    } else if (chunk.kind_case() == v1::ExecChunk::kStdout) {
      out += chunk.stdout();
    } else if (chunk.kind_case() == v1::ExecChunk::kStderr) {
      err += chunk.stderr();
    }
  }
  if (auto s = FromGrpc(reader->Finish(), "verifier exec"); !s.ok()) return s;
  execs_.fetch_add(1);
  if (!exited || exit.exit_code() != 0) {
    return absl::InternalError(absl::StrCat("verifier exited with ", exit.exit_code(), " (", exit.detail(), "): ", err));
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (lines.size() != items.size()) {
    return absl::InternalError(absl::StrCat("verifier printed ", lines.size(), " verdicts for ", items.size(), " items"));
  }
  std::vector<double> rewards;
  for (const auto& l : lines) rewards.push_back(l == "1" ? 1.0 : 0.0);
  return rewards;
}

}  // namespace flotilla::trainer_bridge
