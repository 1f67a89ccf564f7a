// The handlers of each wire API (one file each). `session_id` is the explicit session binding
// the router found (URL path, header or API key), or empty.
#pragma once

#include <string>

#include "flotilla/worker/chat_service.h"
#include "flotilla/common/http_server.h"

namespace flotilla::worker::wire {

void HandleChatCompletions(ChatService& service, const HttpRequest& req,
                           const std::string& session_id, HttpResponder& out);
void HandleResponses(ChatService& service, const HttpRequest& req, const std::string& session_id,
                     HttpResponder& out);
void HandleMessages(ChatService& service, const HttpRequest& req, const std::string& session_id,
                    HttpResponder& out);
void HandleCountTokens(ChatService& service, const HttpRequest& req, HttpResponder& out);

// Each API's own error shape.
void SendOpenAiError(HttpResponder& out, const absl::Status& status);
void SendAnthropicError(HttpResponder& out, const absl::Status& status);

}  // namespace flotilla::worker::wire
