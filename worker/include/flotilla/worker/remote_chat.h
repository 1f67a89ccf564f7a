// RemoteChat: an external OpenAI-compatible endpoint (POST {base_url}/chat/completions) or
// Anthropic-compatible one (POST {base_url}/messages, for a base URL written
// "anthropic+http[s]://...") that a ChatService forwards its requests to instead of the engine,
// so a scaffold or an agent CLI pointed at the worker is evaluated against a model served
// elsewhere while the worker still records the trajectory.
//
// What is recorded: the endpoint returns text, not token ids, so the trajectory is text-level
// (turns with text and tool calls, no token spans, no logprobs or routing) and the endpoint's
// own usage figures are summed into the trajectory's metrics under kUsagePromptTokens and
// kUsageCompletionTokens. Such a trajectory cannot be trained on token-exactly.
//
// base_url is "http://HOST[:PORT][/PATH]" or "https://..." (PATH usually "/v1"); https checks
// the peer's certificate against the system's trust store. The API key (may be empty: no key
// header) is sent as "Authorization: Bearer KEY" (OpenAI) or "x-api-key: KEY" with
// "anthropic-version: 2023-06-01" (Anthropic). Requests are not streamed. Both APIs list their
// models at GET {base_url}/models (data[].id).
//
// Thread-safety: thread-safe (every call opens its own connection).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_types.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker {

inline constexpr const char* kUsagePromptTokens = "usage.prompt_tokens";
inline constexpr const char* kUsageCompletionTokens = "usage.completion_tokens";

struct RemoteChatOptions {
  std::string base_url;
  std::string model;       // empty: the first model GET {base_url}/models lists
  std::string api_key;
  uint32_t timeout_ms = 600'000;
};

struct RemoteReply {
  std::string text;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "stop", "length", "tool_calls", ...
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// The endpoint address split from a base URL; InvalidArgument naming the URL otherwise.
struct EndpointUrl {
  bool tls = false;
  bool anthropic = false;  // "anthropic+http[s]://": the Anthropic Messages API
  std::string host;
  std::string port;
  std::string path;  // without a trailing '/'; may be empty
};
absl::StatusOr<EndpointUrl> ParseEndpointUrl(const std::string& url);

// True for "http://...", "https://..." and the same with "anthropic+" before them (a model
// argument naming an endpoint, not a folder).
bool IsEndpointUrl(const std::string& model);

// The chat completions body for `messages` (the system turn first, if any) and `tools`.
nlohmann::json RemoteChatRequestBody(const std::string& model, const std::vector<ChatMessage>& messages,
                                     const std::vector<ToolSpec>& tools, const ChatRequest& params);
// Parses a chat completions reply; InvalidArgument naming the field ("reply: choices[0].message:
// missing") for a body that is not one.
absl::StatusOr<RemoteReply> ParseRemoteChatReply(const std::string& body);

// The Anthropic Messages body for the same (remote_messages.cc): the system turns joined into
// "system", each tool turn a tool_result block in a user turn, consecutive turns of one role
// merged (the API wants them alternating), tool calls as tool_use blocks.
nlohmann::json RemoteMessagesRequestBody(const std::string& model, const std::vector<ChatMessage>& messages,
                                         const std::vector<ToolSpec>& tools, const ChatRequest& params);
// Parses a Messages reply (text and tool_use blocks; stop_reason mapped to the OpenAI names:
// end_turn and stop_sequence "stop", max_tokens "length", tool_use "tool_calls"; usage
// input_tokens and output_tokens); InvalidArgument naming the field otherwise.
absl::StatusOr<RemoteReply> ParseRemoteMessagesReply(const std::string& body);

class RemoteChat {
 public:
  // Resolves the model (GET /models) when options.model is empty.
  static absl::StatusOr<std::unique_ptr<RemoteChat>> Create(RemoteChatOptions options);
  RemoteChat(const RemoteChat&) = delete;
  RemoteChat& operator=(const RemoteChat&) = delete;

  absl::StatusOr<RemoteReply> Complete(const std::vector<ChatMessage>& messages, const std::vector<ToolSpec>& tools,
                                       const ChatRequest& params) const;
  const std::string& model() const { return options_.model; }
  const std::string& base_url() const { return options_.base_url; }

 private:
  RemoteChat(RemoteChatOptions options, EndpointUrl url) : options_(std::move(options)), url_(std::move(url)) {}
  // One HTTP request; the status code and body. Unavailable when the endpoint cannot be reached.
  absl::StatusOr<std::pair<int, std::string>> Call(const std::string& method, const std::string& path,
                                                   const std::string& body) const;
  RemoteChatOptions options_;
  EndpointUrl url_;
};

}  // namespace flotilla::worker
