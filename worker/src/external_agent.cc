#include "flotilla/worker/external_agent.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/sandbox_endpoint.h"

namespace flotilla::worker {
namespace {

namespace fs = std::filesystem;

// Packs a host folder as a tar (by the host's tar) and returns its bytes. Uncompressed: the
// transfer is in-process or on a local link, and compressing costs more than it saves.
absl::StatusOr<std::string> Pack(const std::string& dir) {
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("agent install dir ", dir, ": missing"));
  std::string tmp = (fs::temp_directory_path() / absl::StrCat("flotilla-agent-", RandomU64(), ".tar")).string();
  std::string cmd = absl::StrCat("tar -C '", dir, "' -cf '", tmp, "' .");
  int rc = std::system(cmd.c_str());
  std::ifstream in(tmp, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ::unlink(tmp.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("packing ", dir, ": tar exited ", rc));
  return ss.str();
}

}  // namespace

ExternalAgentSpec PiAgentSpec(const std::string& host_dir, int context_window, int max_tokens) {
  ExternalAgentSpec s;
  s.name = "pi";
  s.host_install_dir = host_dir;
  s.argv = {"node", "/opt/agent/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
            "--provider", "flotilla", "--model", "flotilla", "--no-session", "-p", "{PROMPT}"};
  s.env = {{"PI_CODING_AGENT_DIR", "/root/.pi/agent"}, {"HOME", "/root"},
           {"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  s.files["/root/.pi/agent/models.json"] = absl::StrCat(
      R"({"providers": {"flotilla": {"baseUrl": "{BASE_URL}/v1", "api": "openai-completions", )"
      R"("apiKey": "{API_KEY}", "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false}, )"
      R"("models": [{"id": "flotilla", "name": "Flotilla", "reasoning": false, "input": ["text"], )"
      R"("contextWindow": )", context_window, R"(, "maxTokens": )", max_tokens, "}]}}}\n");
  return s;
}

absl::StatusOr<ExternalAgentRun> RunExternalAgent(ChatService& service, SandboxClient& sandbox,
                                                  int worker_port, const ExternalAgentSpec& spec,
                                                  const std::string& prompt, uint32_t timeout_ms,
                                                  int sandbox_port) {
  ASSIGN_OR_RETURN(std::string packed, Pack(spec.host_install_dir));
  v1::CreateRequest create;
  create.set_policy_name("no-network");
  *create.add_extra_allow() = EndpointNetworkRule(sandbox_port);
  (*create.mutable_labels())["flotilla.scaffold"] = spec.name;
  ASSIGN_OR_RETURN(std::string sandbox_id, sandbox.Create(create));
  ExternalAgentRun run;
  run.sandbox_id = sandbox_id;
  v1::Trajectory header;
  header.set_scaffold(spec.name);
  header.set_sandbox_id(sandbox_id);
  run.session_id = service.OpenSession(header);

  auto body = [&]() -> absl::Status {
    RETURN_IF_ERROR(sandbox.PutFile(sandbox_id, "/tmp/agent.tar", packed, 0644));
    v1::ExecRequest unpack;
    unpack.set_sandbox_id(sandbox_id);
    for (const char* a : {"sh", "-c", ""}) unpack.add_argv(a);
    unpack.set_argv(2, absl::StrCat("mkdir -p ", spec.install_dir, " /app && tar -C ", spec.install_dir,
                                    " -xf /tmp/agent.tar && rm /tmp/agent.tar"));
    unpack.set_timeout_ms(120'000);
    ASSIGN_OR_RETURN(ExecOutcome unpacked, sandbox.Exec(unpack));
    if (unpacked.exit_code != 0) {
      return absl::InternalError(absl::StrCat("unpacking the agent: ", unpacked.output));
    }
    ASSIGN_OR_RETURN(auto endpoint, SandboxEndpoint::Start(&sandbox, sandbox_id, sandbox_port, worker_port));
    const std::string base_url = endpoint->base_url();
    const std::string api_key = "session-" + run.session_id;
    const std::vector<std::pair<absl::string_view, absl::string_view>> subst = {
        {"{BASE_URL}", base_url}, {"{API_KEY}", api_key}, {"{PROMPT}", prompt}};
    for (const auto& [path, content] : spec.files) {
      RETURN_IF_ERROR(sandbox.PutFile(sandbox_id, path, absl::StrReplaceAll(content, subst), 0644));
    }
    v1::ExecRequest req;
    req.set_sandbox_id(sandbox_id);
    for (const std::string& a : spec.argv) req.add_argv(absl::StrReplaceAll(a, subst));
    for (const auto& [k, v] : spec.env) (*req.mutable_env())[k] = absl::StrReplaceAll(v, subst);
    req.set_cwd("/app");
    req.set_timeout_ms(timeout_ms);
    req.set_output_limit_bytes(16 << 20);
    absl::StatusOr<ExecOutcome> out = sandbox.Exec(req);
    run.connections = endpoint->connections();
    endpoint->Stop();
    if (!out.ok()) return out.status();
    run.exit_code = out->exit_code;
    run.reason = out->reason;
    run.output = out->output;
    return absl::OkStatus();
  };
  absl::Status st = body();
  v1::TrajectoryStatus status = !st.ok()                   ? v1::FAILED
                                : run.reason == v1::TIMEOUT ? v1::TIMED_OUT
                                : run.exit_code == 0        ? v1::OK
                                                            : v1::FAILED;
  std::string detail = st.ok() ? absl::StrCat(spec.name, " exited ", run.exit_code) : std::string(st.message());
  auto closed = service.CloseSession(run.session_id, status, 0.0, detail);
  (void)sandbox.Destroy(sandbox_id);
  if (!st.ok()) return st;
  if (!closed.ok()) return closed.status();
  return run;
}

}  // namespace flotilla::worker
