// HttpServer: a small HTTP/1.1 server (Boost.Beast) for the wire APIs and /metrics, on TCP
// ("127.0.0.1:8000", port 0 picks one) or a Unix socket ("unix:/path/to.sock").
//
// Each connection is served on its own thread with keep-alive; a handler may answer once
// (Send) or stream (StartStream, Write..., EndStream) as chunked transfer, which is what
// server-sent events need.
//
// Thread-safety: handlers run concurrently on connection threads. Stop() (and the
// destructor) closes the listener and every open connection and joins their threads.
#pragma once

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

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           HttpHandler handler);
  virtual ~HttpServer() = default;
  // "127.0.0.1:PORT" with the bound port, or "unix:/path".
  virtual std::string address() const = 0;
  virtual int port() const = 0;               // 0 for a Unix socket
  virtual void Stop() = 0;
};

}  // namespace flotilla
