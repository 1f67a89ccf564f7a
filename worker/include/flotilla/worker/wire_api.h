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
#include "flotilla/common/metrics.h"

namespace flotilla::worker {

class WireApi {
 public:
  explicit WireApi(ChatService* service) : service_(service) {}
  void Handle(const HttpRequest& request, HttpResponder& out);

 private:
  ChatService* service_;
};

// Starts an HttpServer on `address` serving `api` (borrowed; must outlive the server), its
// requests counted into `metrics` when given (see CountRequests).
absl::StatusOr<std::unique_ptr<HttpServer>> ServeWireApi(const std::string& address, WireApi* api,
                                                         MetricsRegistry* metrics = nullptr);

// The worker HTTP server's requests, counted by route and HTTP status and timed to their last
// write (flotilla_worker_requests_total{route,status}, flotilla_worker_request_seconds{route})
// around `inner`. Routes are the wire API's ("/chat/completions", "/messages", ... with the
// session prefix and "/v1" dropped), "/metrics", "/api/<view>", "/dashboard" (the page and its
// assets), or "other", so the label set stays bounded. `registry` must outlive the handler.
HttpHandler CountRequests(HttpHandler inner, MetricsRegistry& registry);

// The route label of a request path (as CountRequests uses it).
std::string RouteLabel(const std::string& path);

}  // namespace flotilla::worker
