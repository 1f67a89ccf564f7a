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
// `node`, when given, goes in as ./node.
absl::StatusOr<std::string> Pack(const std::string& dir, const std::string& node) {
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("agent install dir ", dir, ": missing"));
  if (!node.empty() && !fs::is_regular_file(node)) {
    return absl::NotFoundError(absl::StrCat("agent node binary ", node, ": missing"));
  }
  std::string tmp = (fs::temp_directory_path() / absl::StrCat("flotilla-agent-", RandomU64(), ".tar")).string();
  std::string cmd = absl::StrCat("tar -C '", dir, "' -cf '", tmp, "' .");
  if (!node.empty()) {
    absl::StrAppend(&cmd, " -C '", fs::path(node).parent_path().string(), "' '",
                    fs::path(node).filename().string(), "'");
  }
  int rc = std::system(cmd.c_str());
  std::ifstream in(tmp, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ::unlink(tmp.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("packing ", dir, ": tar exited ", rc));
  return ss.str();
}

// Copies the agent (and node) into the sandbox's writable layer.
absl::Status Install(SandboxClient& sandbox, const std::string& sandbox_id, const ExternalAgentSpec& spec,
                     const std::string& cwd) {
  ASSIGN_OR_RETURN(std::string packed, Pack(spec.host_install_dir, spec.host_node));
  RETURN_IF_ERROR(sandbox.PutFile(sandbox_id, "/tmp/agent.tar", packed, 0644));
  packed.clear();
  v1::ExecRequest unpack;
  unpack.set_sandbox_id(sandbox_id);
  for (const char* a : {"sh", "-c", ""}) unpack.add_argv(a);
  unpack.set_argv(2, absl::StrCat("mkdir -p ", spec.install_dir, " ", cwd, " && tar -C ", spec.install_dir,
                                  " -xf /tmp/agent.tar && rm /tmp/agent.tar"));
  unpack.set_timeout_ms(300'000);
  ASSIGN_OR_RETURN(ExecOutcome unpacked, sandbox.Exec(unpack));
  if (unpacked.exit_code != 0 || unpacked.reason != v1::STOP_REASON_NONE) {
    return absl::InternalError(absl::StrCat("unpacking the agent: exit ", unpacked.exit_code, " (",
                                            v1::StopReason_Name(unpacked.reason), " ", unpacked.detail,
                                            "): ", unpacked.output));
  }
  return absl::OkStatus();
}

}  // namespace

ExternalAgentSpec PiAgentSpec(const std::string& host_dir, int context_window, int max_tokens) {
  ExternalAgentSpec s;
  s.name = "pi";
  s.entry = "node_modules/@mariozechner/pi-coding-agent/dist/cli.js";
  s.host_install_dir = host_dir;
  s.argv = {"{NODE}", "/opt/agent/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
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

ExternalAgentSpec CodexAgentSpec(const std::string& host_dir) {
  ExternalAgentSpec s;
  s.name = "codex";
  s.entry = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
  s.host_install_dir = host_dir;
  s.argv = {"/opt/agent/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", "exec",
            "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "{PROMPT}"};
  s.env = {{"CODEX_HOME", "/root/.codex"}, {"HOME", "/root"}, {"FLOTILLA_API_KEY", "{API_KEY}"},
           {"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  s.files["/root/.codex/config.toml"] =
      "model = \"flotilla\"\nmodel_provider = \"flotilla\"\ncheck_for_update_on_startup = false\n"
      "[model_providers.flotilla]\nname = \"Flotilla\"\nbase_url = \"{BASE_URL}/v1\"\n"
      "env_key = \"FLOTILLA_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n"
      "stream_max_retries = 0\n[analytics]\nenabled = false\n";
  return s;
}

ExternalAgentSpec OpenCodeAgentSpec(const std::string& host_dir, int context_window, int max_tokens) {
  ExternalAgentSpec s;
  s.name = "opencode";
  s.entry = "node_modules/opencode-linux-x64/bin/opencode";
  s.host_install_dir = host_dir;
  s.argv = {"/opt/agent/" + s.entry, "run", "-m", "flotilla/flotilla", "{PROMPT}"};
  s.env = {{"HOME", "/root"},
           {"PATH", "/usr/local/bin:/usr/bin:/bin"},
           {"OPENCODE_CONFIG_CONTENT",
            absl::StrCat(R"({"autoupdate": false, "share": "disabled", "provider": {"flotilla": {)"
                         R"("npm": "@ai-sdk/openai-compatible", "name": "Flotilla", )"
                         R"("options": {"baseURL": "{BASE_URL}/v1", "apiKey": "{API_KEY}"}, )"
                         R"("models": {"flotilla": {"name": "Flotilla", "limit": {"context": )",
                         context_window, R"(, "output": )", max_tokens, "}}}}}}")},
           {"OPENCODE_DISABLE_MODELS_FETCH", "1"},
           {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
           {"OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"},
           {"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"},
           {"OPENCODE_DISABLE_SHARE", "1"}};
  // Killed by the memory limit at 256 MiB while it loads, before any request.
  s.memory_bytes = 1ull << 30;
  return s;
}

ExternalAgentSpec ClaudeCodeAgentSpec(const std::string& host_dir, int max_tokens) {
  ExternalAgentSpec s;
  s.name = "claude-code";
  s.entry = "node_modules/@anthropic-ai/claude-code/bin/claude.exe";
  s.host_install_dir = host_dir;
  s.argv = {"/opt/agent/" + s.entry, "-p", "{PROMPT}", "--model", "flotilla", "--allowedTools",
            "Bash Edit Write Read Glob Grep LS MultiEdit TodoWrite"};
  s.env = {{"HOME", "/root"},
           {"PATH", "/usr/local/bin:/usr/bin:/bin"},
           {"ANTHROPIC_BASE_URL", "{BASE_URL}"},
           {"ANTHROPIC_API_KEY", "{API_KEY}"},
           {"ANTHROPIC_SMALL_FAST_MODEL", "flotilla"},
           {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
           {"DISABLE_AUTOUPDATER", "1"},
           {"DISABLE_TELEMETRY", "1"},
           {"DISABLE_ERROR_REPORTING", "1"},
           {"CLAUDE_CODE_MAX_OUTPUT_TOKENS", absl::StrCat(max_tokens)}};
  return s;
}

ExternalAgentSpec QwenCodeAgentSpec(const std::string& host_dir, int max_tokens) {
  ExternalAgentSpec s;
  s.name = "qwen-code";
  s.entry = "node_modules/@qwen-code/qwen-code/cli-entry.js";
  s.host_install_dir = host_dir;
  s.argv = {"{NODE}", "/opt/agent/" + s.entry, "--auth-type", "openai", "-m", "flotilla", "--yolo", "{PROMPT}"};
  s.env = {{"HOME", "/root"},
           {"PATH", "/usr/local/bin:/usr/bin:/bin"},
           {"OPENAI_API_KEY", "{API_KEY}"},
           {"OPENAI_BASE_URL", "{BASE_URL}/v1"},
           {"OPENAI_MODEL", "flotilla"}};
  s.files["/root/.qwen/settings.json"] = absl::StrCat(
      R"({"telemetry": {"enabled": false}, "privacy": {"usageStatisticsEnabled": false}, )"
      R"("general": {"disableAutoUpdate": true, "disableUpdateNag": true}, )"
      R"("model": {"name": "flotilla", "generationConfig": {"samplingParams": {"max_tokens": )",
      max_tokens, "}}}}\n");
  return s;
}

const std::vector<std::string>& AgentCliNames() {
  static const std::vector<std::string> names = {"pi", "codex", "opencode", "claude-code", "qwen-code"};
  return names;
}

absl::StatusOr<ExternalAgentSpec> AgentCliSpec(const std::string& name, const std::string& host_dir,
                                               int context_window, int max_tokens) {
  if (name == "pi") return PiAgentSpec(host_dir, context_window, max_tokens);
  if (name == "codex") return CodexAgentSpec(host_dir);
  if (name == "opencode") return OpenCodeAgentSpec(host_dir, context_window, max_tokens);
  if (name == "claude-code") return ClaudeCodeAgentSpec(host_dir, max_tokens);
  if (name == "qwen-code") return QwenCodeAgentSpec(host_dir, max_tokens);
  return absl::NotFoundError(
      absl::StrCat("agent CLI '", name, "': unknown (pi, codex, opencode, claude-code, qwen-code)"));
}

absl::StatusOr<AgentCliOutcome> RunAgentCliInSandbox(SandboxClient& sandbox, const std::string& sandbox_id,
                                                     const std::string& session_id, int worker_port,
                                                     const ExternalAgentSpec& spec, const std::string& prompt,
                                                     const std::string& cwd, uint32_t timeout_ms,
                                                     const std::map<std::string, std::string>& env,
                                                     int sandbox_port) {
  if (!spec.preinstalled) RETURN_IF_ERROR(Install(sandbox, sandbox_id, spec, cwd));
  const std::string node = spec.host_node.empty() ? "" : spec.install_dir + "/node";
  ASSIGN_OR_RETURN(auto endpoint, SandboxEndpoint::Start(&sandbox, sandbox_id, sandbox_port, worker_port, node));
  const std::string base_url = endpoint->base_url();
  const std::string api_key = "session-" + session_id;
  const std::string node_command = node.empty() ? "node" : node;
  const std::vector<std::pair<absl::string_view, absl::string_view>> subst = {
      {"{BASE_URL}", base_url}, {"{API_KEY}", api_key}, {"{PROMPT}", prompt}, {"{NODE}", node_command}};
  for (const auto& [path, content] : spec.files) {
    RETURN_IF_ERROR(sandbox.PutFile(sandbox_id, path, absl::StrReplaceAll(content, subst), 0644));
  }
  v1::ExecRequest req;
  req.set_sandbox_id(sandbox_id);
  for (const std::string& a : spec.argv) req.add_argv(absl::StrReplaceAll(a, subst));
  for (const auto& [k, v] : env) (*req.mutable_env())[k] = v;
  for (const auto& [k, v] : spec.env) (*req.mutable_env())[k] = absl::StrReplaceAll(v, subst);
  req.set_cwd(cwd);
  req.set_timeout_ms(timeout_ms);
  req.set_output_limit_bytes(16 << 20);
  absl::StatusOr<ExecOutcome> out = sandbox.Exec(req);
  AgentCliOutcome outcome;
  outcome.connections = endpoint->connections();
  endpoint->Stop();
  if (!out.ok()) return out.status();
  outcome.exit_code = out->exit_code;
  outcome.reason = out->reason;
  outcome.output = out->output;
  return outcome;
}

absl::StatusOr<ExternalAgentRun> RunExternalAgent(ChatService& service, SandboxClient& sandbox,
                                                  int worker_port, const ExternalAgentSpec& spec,
                                                  const std::string& prompt, uint32_t timeout_ms,
                                                  int sandbox_port) {
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
  absl::StatusOr<AgentCliOutcome> out = RunAgentCliInSandbox(sandbox, sandbox_id, run.session_id, worker_port, spec,
                                                             prompt, "/app", timeout_ms, {}, sandbox_port);
  absl::Status st = out.status();
  if (out.ok()) {
    run.exit_code = out->exit_code;
    run.reason = out->reason;
    run.output = out->output;
    run.connections = out->connections;
  }
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
