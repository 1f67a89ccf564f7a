// ServeConnection: one HTTP/1.1 connection of HttpServer, read and answered on the calling
// thread until the client closes, asks to close, sends a request the parser refuses, or the
// connection's ReadDeadline passes. Private to flotilla_http; the HTTP fuzz target drives it
// over a socket pair.
//
// Refused requests get an answer before the connection closes: 431 when the header passes
// HttpServerOptions::max_header_bytes, 413 when the body passes max_body_bytes (announced by
// Content-Length or reached while reading chunks), 400 for anything else the parser refuses
// (bad request line, bad header, malformed chunked encoding), 408 when a begun request has not
// arrived within HttpServerOptions::read_timeout (slow clients); a connection idle that long
// closes without an answer.
#pragma once

#include <atomic>
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/http_server.h"

namespace flotilla::http_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// When the request being read must have arrived: armed while ServeConnection waits for and
// reads a request, disarmed while the handler runs (a stream may last as long as it likes).
// The server's watchdog closes the socket of a connection whose deadline has passed, which
// ends the blocking read. Thread-safe (one atomic).
class ReadDeadline {
 public:
  using Clock = std::chrono::steady_clock;
  void Arm(std::chrono::milliseconds within) {
    at_ms_.store(NowMs() + within.count(), std::memory_order_relaxed);
  }
  void Disarm() { at_ms_.store(0, std::memory_order_relaxed); }
  [[nodiscard]] bool Passed() const {
    const int64_t at = at_ms_.load(std::memory_order_relaxed);
    return at != 0 && NowMs() >= at;
  }

 private:
  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  }
  std::atomic<int64_t> at_ms_{0};
};

template <class Socket>
class Responder : public HttpResponder {
 public:
  Responder(Socket& socket, unsigned version, bool keep_alive)
      : socket_(socket), version_(version), keep_alive_(keep_alive) {}

  void Send(int status, std::string_view content_type, std::string_view body) override {
    http::response<http::string_body> res{static_cast<http::status>(status), version_};
    res.set(http::field::content_type, std::string(content_type));
    res.set(http::field::server, "flotilla-worker");
    res.keep_alive(keep_alive_);
    res.body() = std::string(body);
    res.prepare_payload();
    beast::error_code ec;
    http::write(socket_, res, ec);
    broken_ = broken_ || static_cast<bool>(ec);
    done_ = true;
  }

  void StartStream(int status, std::string_view content_type) override {
    http::response<http::empty_body> res{static_cast<http::status>(status), version_};
    res.set(http::field::content_type, std::string(content_type));
    res.set(http::field::cache_control, "no-cache");
    res.set(http::field::server, "flotilla-worker");
    res.keep_alive(keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    http::write_header(socket_, sr, ec);
    broken_ = broken_ || static_cast<bool>(ec);
    streaming_ = true;
  }

  bool Write(std::string_view data) override {
    if (broken_ || data.empty()) return !broken_;
    beast::error_code ec;
    asio::write(socket_, http::make_chunk(asio::const_buffer(data.data(), data.size())), ec);
    broken_ = broken_ || static_cast<bool>(ec);
    return !broken_;
  }

  void EndStream() override {
    if (!broken_) {
      beast::error_code ec;
      asio::write(socket_, http::make_chunk_last(), ec);
      broken_ = broken_ || static_cast<bool>(ec);
    }
    done_ = true;
  }

  bool done() const { return done_; }
  bool streaming() const { return streaming_; }
  bool broken() const { return broken_; }

 private:
  Socket& socket_;
  unsigned version_;
  bool keep_alive_;
  bool done_ = false;
  bool streaming_ = false;
  bool broken_ = false;
};

// The status a refused request is answered with (see the file comment).
inline int RefusalStatus(const beast::error_code& ec) {
  if (ec == http::error::header_limit) return 431;
  if (ec == http::error::body_limit || ec == http::error::buffer_overflow) return 413;
  return 400;
}

template <class Socket>
void ServeConnection(Socket& socket, const HttpHandler& handler, const HttpServerOptions& options,
                     ReadDeadline* deadline) {
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    parser.header_limit(options.max_header_bytes);
    beast::error_code ec;
    if (deadline != nullptr) deadline->Arm(options.read_timeout);
    http::read(socket, buffer, parser, ec);
    const bool timed_out = deadline != nullptr && deadline->Passed();
    if (deadline != nullptr) deadline->Disarm();
    if (ec && timed_out) {
      // The watchdog shut the reading side: a request begun too slowly gets its 408; an idle
      // keep-alive connection just closes.
      if (parser.got_some()) {
        Responder<Socket> r(socket, 11, false);
        r.Send(408, "application/json", R"({"error":{"message":"request not received in time"}})");
      }
      break;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::error::bad_descriptor || ec == http::error::partial_message) {
      break;
    }
    if (ec) {
      Responder<Socket> r(socket, 11, false);
      r.Send(RefusalStatus(ec), "application/json",
             absl::StrCat(R"({"error":{"message":"bad HTTP request: )", ec.message(), R"("}})"));
      break;
    }
    auto& msg = parser.get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    for (const auto& field : msg) {
      req.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
    }
    req.body = std::move(msg.body());
    Responder<Socket> responder(socket, msg.version(), msg.keep_alive());
    handler(req, responder);
    if (!responder.done()) {
      if (responder.streaming()) {
        responder.EndStream();
      } else {
        responder.Send(500, "application/json", R"({"error":{"message":"no response"}})");
      }
    }
    if (responder.broken() || !msg.keep_alive()) break;
  }
  beast::error_code ignored;
  socket.shutdown(Socket::shutdown_both, ignored);
}

}  // namespace flotilla::http_internal
