// A minimal HTTP/1.x server for Prometheus scrapes: GET /metrics answers 200 with whatever
// `render` returns (text exposition format); any other path is 404, any other method 405.
// One connection at a time, closed after each response (scrapes are rare and small).
//
// Thread-safe to construct and destroy from any thread. Owns its listening socket and one
// serving thread; `render` is called on that thread and must outlive the server.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace flotilla::scheduler {

class MetricsServer {
 public:
  using RenderFn = std::function<std::string()>;

  // Binds `address` ("host:port"; port 0 picks a free one) and starts serving.
  // InvalidArgument naming the address when it does not parse; Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, RenderFn render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  [[nodiscard]] int port() const { return port_; }

 private:
  MetricsServer(int fd, int port, RenderFn render);
  void Serve();
  void Answer(int conn);

  const int fd_;
  const int port_;
  const RenderFn render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flotilla::scheduler
