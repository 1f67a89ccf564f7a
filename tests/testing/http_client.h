// A blocking HTTP/1.1 client for tests (Boost.Beast): one request per call, whole body read
// (chunked SSE bodies included). Link Boost::headers.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <string>

namespace flotilla::testing {

struct HttpResult {
  int status = 0;
  std::string content_type;
  std::string body;
};

// The same, to `host` (an IPv4 or IPv6 address, e.g. a network namespace's).
inline HttpResult HttpCallAt(const std::string& host, int port, const std::string& method,
                             const std::string& target, const std::string& body = "",
                             const std::map<std::string, std::string>& headers = {}) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address(host), static_cast<uint16_t>(port)});
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, host);
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(socket, buffer, parser);
  HttpResult r;
  r.status = parser.get().result_int();
  r.content_type = std::string(parser.get()[http::field::content_type]);
  r.body = parser.get().body();
  return r;
}

inline HttpResult HttpCall(int port, const std::string& method, const std::string& target,
                           const std::string& body = "",
                           const std::map<std::string, std::string>& headers = {}) {
  return HttpCallAt("127.0.0.1", port, method, target, body, headers);
}

}  // namespace flotilla::testing
