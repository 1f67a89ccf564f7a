// HttpServer: a small HTTP/1.1 server (Boost.Beast) for the wire APIs and /metrics, on TCP
// ("127.0.0.1:8000", port 0 picks one) or a Unix socket ("unix:/path/to.sock").
//
// Each connection is served on its own thread with keep-alive; a handler may answer once
// (Send) or stream (StartStream, Write..., EndStream) as chunked transfer, which is what
// server-sent events need.
//
// Limits against hostile or broken clients (HttpServerOptions): a request must arrive within
// read_timeout of the server starting to wait for it (a slow client gets 408, an idle keep-alive
// connection is closed), its header and body are bounded (431, 413), malformed requests get 400,
// and at most max_connections are served at once (the next ones get 503 and are closed). A
// client that goes away mid-stream makes HttpResponder::Write return false.
//
// Thread-safety: handlers run concurrently on connection threads. Stop() (and the
// destructor) closes the listener and every open connection and joins their threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flotilla {

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string path;                           // without the query string
  std::string query;
  std::map<std::string, std::string> headers; // names in lower case
  std::string body;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// How a handler answers. Exactly one of Send() or StartStream()..EndStream() per request.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void Send(int status, std::string_view content_type, std::string_view body) = 0;
  virtual void StartStream(int status, std::string_view content_type) = 0;
  // False once the client has gone away (the handler may stop early).
  virtual bool Write(std::string_view data) = 0;
  virtual void EndStream() = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpServerOptions {
  uint64_t max_body_bytes = 64ull << 20;   // larger bodies: 413
  uint32_t max_header_bytes = 1u << 20;    // request line + headers; larger: 431
  // From the moment the server waits for a request until all of it has arrived (keep-alive
  // idle time included); the handler's own time does not count.
  std::chrono::milliseconds read_timeout{60'000};
  size_t max_connections = 4096;           // open connections served at once; more: 503
};

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           HttpHandler handler,
                                                           const HttpServerOptions& options = {});
  virtual ~HttpServer() = default;
  // "127.0.0.1:PORT" with the bound port, or "unix:/path".
  virtual std::string address() const = 0;
  virtual int port() const = 0;               // 0 for a Unix socket
  // Connections open now (served or idle), for tests and metrics.
  virtual size_t open_connections() const = 0;
  virtual void Stop() = 0;
};

}  // namespace flotilla
