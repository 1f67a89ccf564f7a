// The scheduler's Prometheus endpoint: GET (or HEAD) /metrics answers 200 with whatever
// `render` returns (text exposition format); any other path is 404, any other method 405.
// Served by the project's HTTP server (flotilla/common/http_server.h).
//
// Thread-safe to construct and destroy from any thread; `render` is called on the server's
// connection threads (possibly several at once) and must outlive the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/common/http_server.h"

namespace flotilla::scheduler {

class MetricsServer {
 public:
  using RenderFn = std::function<std::string()>;

  // Binds `address` ("host:port"; port 0 picks a free one) and starts serving.
  // InvalidArgument naming the address when it does not parse or resolve; Unavailable when it
  // cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, RenderFn render);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  [[nodiscard]] int port() const { return http_->port(); }

 private:
  explicit MetricsServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}
  std::unique_ptr<HttpServer> http_;
};

}  // namespace flotilla::scheduler
