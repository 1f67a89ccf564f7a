// The request bodies of the three wire APIs, parsed into a ChatRequest. Each is a pure function
// of the body text (no service, no I/O): bad input is an InvalidArgument naming the field, in
// the API's own path notation ("messages[2].role", "messages.2.content", "input[0].type").
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_types.h"

namespace flotilla::worker::wire {

// POST /v1/chat/completions. Sets *include_usage from stream_options.include_usage.
absl::StatusOr<ChatRequest> ParseChatCompletionsRequest(const std::string& text, bool* include_usage);
// POST /v1/messages (require_max_tokens) and /v1/messages/count_tokens (not).
absl::StatusOr<ChatRequest> ParseMessagesRequest(const std::string& text, bool require_max_tokens);
// POST /v1/responses.
absl::StatusOr<ChatRequest> ParseResponsesRequest(const std::string& text);

}  // namespace flotilla::worker::wire
