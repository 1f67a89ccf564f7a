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
// the session-binding key and "{PROMPT}" the task prompt.
struct ExternalAgentSpec {
  std::string name;                              // the scaffold name recorded ("pi", ...)
  std::string host_install_dir;                  // copied to install_dir in the sandbox
  std::string install_dir = "/opt/agent";
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;      // sandbox path -> content
};

// The Pi coding agent (npm @mariozechner/pi-coding-agent, installed under host_dir) with an
// openai-completions provider in its models file.
ExternalAgentSpec PiAgentSpec(const std::string& host_dir, int context_window, int max_tokens);

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
