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
// With a metrics registry every request is counted by route and HTTP status, and timed to its
// last byte (flotilla_worker_requests_total, flotilla_worker_request_seconds).
//
// Thread-safety: Handle() may run concurrently. The service and the registry are borrowed.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/common/http_server.h"
#include "flotilla/common/metrics.h"

namespace flotilla::worker {

class RequestMetrics;

class WireApi {
 public:
  explicit WireApi(ChatService* service, MetricsRegistry* metrics = nullptr);
  ~WireApi();
  WireApi(const WireApi&) = delete;
  WireApi& operator=(const WireApi&) = delete;
  void Handle(const HttpRequest& request, HttpResponder& out);

 private:
  // Routes the request; `route` is set to the route it matched ("other" when none).
  void Route(const HttpRequest& request, HttpResponder& out, std::string* route);
  ChatService* service_;
  std::unique_ptr<RequestMetrics> metrics_;  // null without a registry
};

// Starts an HttpServer on `address` serving `api` (borrowed; must outlive the server).
absl::StatusOr<std::unique_ptr<HttpServer>> ServeWireApi(const std::string& address, WireApi* api);

}  // namespace flotilla::worker
