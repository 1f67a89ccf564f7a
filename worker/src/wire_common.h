// Shared pieces of the three wire APIs (the JSON field readers are in wire_json.h): SSE framing,
// logprob rendering and status-to-HTTP mapping.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/common/http_server.h"
#include "nlohmann/json.hpp"
#include "wire_json.h"

namespace flotilla::worker::wire {

using Json = nlohmann::ordered_json;

// JSON text; invalid UTF-8 (never expected: text is sanitized) is replaced, not thrown.
std::string Dump(const Json& j);

int HttpStatusFor(const absl::Status& s);
// A reply whose generation the engine interrupted (a checkpoint switch, an operator's
// Interrupt) is not the model's answer: the wire APIs report it as their error (Unavailable,
// 503 or an error event on a stream) instead of passing a cut-off turn off as a finished one.
// The session keeps the turn, recorded as interrupted.
absl::StatusOr<ChatReply> FailIfInterrupted(absl::StatusOr<ChatReply> reply);

// A fresh id for a wire object ("chatcmpl-" + 24 hex digits and the like).
std::string NewWireId(std::string_view prefix);
int64_t UnixSeconds();

// The token as text for a logprobs entry, and its raw bytes.
std::string TokenText(int32_t token, const HfChat* hf = nullptr);
Json TokenBytes(int32_t token, const HfChat* hf = nullptr);
// OpenAI-style logprob entries ({token, logprob, bytes, top_logprobs}) for `tokens`.
Json LogprobEntries(const std::vector<TokenRecord>& tokens, uint32_t top_n, const HfChat* hf = nullptr);

// The generated tokens a reply's logprobs describe: all but a trailing stop token.
std::vector<TokenRecord> ContentTokens(const std::vector<TokenRecord>& tokens, const HfChat* hf = nullptr);

// Server-sent events over a streaming response, started lazily so that an error before the
// first event can still be a plain JSON error with its HTTP status.
class SseStream {
 public:
  explicit SseStream(HttpResponder& responder) : responder_(responder) {}
  void Event(const Json& data, std::string_view event_name = "");
  void Raw(std::string_view line);   // e.g. "data: [DONE]"
  void End();
  bool started() const { return started_; }

 private:
  void Start();
  HttpResponder& responder_;
  bool started_ = false;
};

}  // namespace flotilla::worker::wire
