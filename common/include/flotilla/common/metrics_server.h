// MetricsServer: a daemon's Prometheus endpoint (`flotilla scheduler`, `node`, `engine`,
// `bridge serve` with --metrics-listen): GET (or HEAD) /metrics answers 200 with whatever
// `render` returns (text exposition format); any other path is 404, any other method 405.
// Served by the project's one HTTP server (flotilla/common/http_server.h); processes that
// serve a dashboard or the wire APIs answer /metrics on that server instead.
//
// Thread-safe to construct and destroy from any thread; `render` is called on the server's
// connection threads (possibly several at once) and must outlive the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/common/http_server.h"
#include "flotilla/common/metrics.h"

namespace flotilla {

class MetricsServer {
 public:
  using RenderFn = std::function<std::string()>;

  // Binds `address` ("host:port"; port 0 picks a free one) and starts serving.
  // InvalidArgument naming the address when it does not parse or resolve; Unavailable when it
  // cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, RenderFn render);
  // Serves `registry`'s figures (borrowed; must outlive the server).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              const MetricsRegistry& registry);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  [[nodiscard]] int port() const { return http_->port(); }

 private:
  explicit MetricsServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}
  std::unique_ptr<HttpServer> http_;
};

}  // namespace flotilla
