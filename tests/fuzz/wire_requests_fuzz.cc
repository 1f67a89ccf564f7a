// The request bodies of the three wire APIs (worker/src/wire_requests.h): any bytes a client
// sends are either a ChatRequest that keeps the parsers' promises or an InvalidArgument.
#include <string>

#include "fuzz_check.h"
#include "fuzz_target.h"
#include "wire_requests.h"

namespace {

using flotilla::worker::ChatRequest;

void CheckAccepted(const absl::StatusOr<ChatRequest>& r) {
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!r.status().message().empty());
    return;
  }
  FUZZ_CHECK(r->temperature >= 0.0f && r->temperature <= 2.0f);
  FUZZ_CHECK(r->top_p >= 0.0f && r->top_p <= 1.0f);
  FUZZ_CHECK(r->top_logprobs <= 20);
  for (const auto& t : r->tools) FUZZ_CHECK(!t.name.empty());
}

}  // namespace

FLOTILLA_FUZZ_TARGET(wire_chat) {
  bool include_usage = false;
  auto r = flotilla::worker::wire::ParseChatCompletionsRequest(std::string(reinterpret_cast<const char*>(data), size),
                                                               &include_usage);
  CheckAccepted(r);
  if (r.ok()) {
    FUZZ_CHECK(r->max_tokens >= 1);
  }
}

FLOTILLA_FUZZ_TARGET(wire_messages) {
  // The first byte picks /v1/messages (max_tokens required) or /v1/messages/count_tokens.
  const bool require_max_tokens = size > 0 && (data[0] & 1);
  const std::string body = size > 0 ? std::string(reinterpret_cast<const char*>(data) + 1, size - 1) : "";
  CheckAccepted(flotilla::worker::wire::ParseMessagesRequest(body, require_max_tokens));
}

FLOTILLA_FUZZ_TARGET(wire_responses) {
  CheckAccepted(
      flotilla::worker::wire::ParseResponsesRequest(std::string(reinterpret_cast<const char*>(data), size)));
}
