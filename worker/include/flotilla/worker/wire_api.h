// WireApi: routes HTTP requests to the OpenAI Chat Completions, OpenAI Responses and
// Anthropic Messages handlers over one ChatService.
//
//   POST /v1/chat/completions   POST /v1/responses   POST /v1/messages
//   POST /v1/messages/count_tokens   GET /v1/models   GET /health
//
// The "/v1" prefix is optional. A request is bound to a session by, in order: a path prefix
// "/s/<session>/...", the header "x-flotilla-session: <session>", or an API key
// "session-<session>" (Authorization: Bearer or x-api-key); otherwise by prefix matching.
//
// Thread-safety: Handle() may run concurrently. The service is borrowed.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/common/http_server.h"

namespace flotilla::worker {

class WireApi {
 public:
  explicit WireApi(ChatService* service) : service_(service) {}
  void Handle(const HttpRequest& request, HttpResponder& out);

 private:
  ChatService* service_;
};

// Starts an HttpServer on `address` serving `api` (borrowed; must outlive the server).
absl::StatusOr<std::unique_ptr<HttpServer>> ServeWireApi(const std::string& address, WireApi* api);

}  // namespace flotilla::worker
