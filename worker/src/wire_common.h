// Shared pieces of the three wire APIs: JSON parsing with field-named errors, SSE framing,
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

namespace flotilla::worker::wire {

using Json = nlohmann::ordered_json;
using InJson = nlohmann::json;

// JSON text; invalid UTF-8 (never expected: text is sanitized) is replaced, not thrown.
std::string Dump(const Json& j);
absl::StatusOr<InJson> ParseBody(const std::string& body);

// Field readers: absent fields keep the default; a present field of the wrong type is an
// InvalidArgument naming `path`.
absl::Status ReadString(const InJson& obj, const char* key, const std::string& path, std::string* out);
absl::Status ReadBool(const InJson& obj, const char* key, const std::string& path, bool* out);
absl::Status ReadFloat(const InJson& obj, const char* key, const std::string& path, float lo,
                       float hi, float* out);
absl::Status ReadUint(const InJson& obj, const char* key, const std::string& path, uint32_t lo,
                      uint32_t hi, uint32_t* out);
absl::Status ReadSeed(const InJson& obj, const char* key, const std::string& path,
                      std::optional<uint64_t>* out);
// A text content: a string, null (empty), or an array of parts whose `text` is taken when the
// part's type is one of `text_types`. Other part types are an error naming the part.
absl::StatusOr<std::string> ReadTextContent(const InJson& v, const std::string& path,
                                            const std::vector<std::string>& text_types);
absl::Status Invalid(const std::string& path, const std::string& what);

int HttpStatusFor(const absl::Status& s);

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
