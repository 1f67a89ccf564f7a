#include "flotilla/common/metrics_server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flotilla {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address, RenderFn render) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address '", address, "': expected host:port"));
  }
  auto http = HttpServer::Start(address, [render = std::move(render)](const HttpRequest& req, HttpResponder& out) {
    if (req.path != "/metrics") {
      out.Send(404, "text/plain", "only /metrics is served here\n");
    } else if (req.method != "GET" && req.method != "HEAD") {
      out.Send(405, "text/plain", "use GET\n");
    } else {
      out.Send(200, "text/plain; version=0.0.4; charset=utf-8", req.method == "GET" ? render() : std::string());
    }
  });
  if (!http.ok()) {
    if (absl::IsInvalidArgument(http.status())) {
      return absl::InvalidArgumentError(absl::StrCat("metrics address: ", http.status().message()));
    }
    return absl::UnavailableError(absl::StrCat("metrics address '", address, "': ", http.status().message()));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(*http)));
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                   const MetricsRegistry& registry) {
  return Start(address, [&registry] { return registry.RenderPrometheus(); });
}

}  // namespace flotilla
