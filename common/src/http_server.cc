#include "flotilla/common/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"

namespace flotilla {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr uint64_t kBodyLimit = 64ull << 20;

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

template <class Socket>
void ServeConnection(Socket& socket, const HttpHandler& handler) {
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    parser.header_limit(1 << 20);
    beast::error_code ec;
    http::read(socket, buffer, parser, ec);
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::error::bad_descriptor) {
      break;
    }
    if (ec) {
      Responder<Socket> r(socket, 11, false);
      const bool too_big = ec == http::error::body_limit;
      r.Send(too_big ? 413 : 400, "application/json",
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

template <class Protocol>
class ServerImpl : public HttpServer {
 public:
  ServerImpl(typename Protocol::endpoint endpoint, HttpHandler handler, std::string display, int port)
      : acceptor_(io_), handler_(std::move(handler)), address_(std::move(display)), port_(port) {
    endpoint_ = endpoint;
  }
  ~ServerImpl() override { Stop(); }

  absl::Status Listen() {
    beast::error_code ec;
    acceptor_.open(endpoint_.protocol(), ec);
    if (!ec && std::is_same_v<Protocol, asio::ip::tcp>) {
      acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) acceptor_.bind(endpoint_, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("listen on ", address_, ": ", ec.message()));
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      port_ = acceptor_.local_endpoint().port();
      address_ = absl::StrCat(acceptor_.local_endpoint().address().to_string(), ":", port_);
    }
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return absl::OkStatus();
  }

  std::string address() const override { return address_; }
  int port() const override { return port_; }

  void Stop() override {
    if (stopping_.exchange(true)) return;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    beast::error_code ec;
    acceptor_.close(ec);
    std::list<Connection> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& c : conns_) ::shutdown(c.socket->native_handle(), SHUT_RDWR);
      conns.swap(conns_);
    }
    for (auto& c : conns) c.thread.join();
  }

 private:
  struct Connection {
    std::shared_ptr<typename Protocol::socket> socket;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };

  void AcceptLoop() {
    while (!stopping_) {
      auto socket = std::make_shared<typename Protocol::socket>(io_);
      beast::error_code ec;
      acceptor_.accept(*socket, ec);
      if (stopping_) break;
      if (ec) {
        if (ec == asio::error::invalid_argument || ec == asio::error::bad_descriptor) break;
        continue;
      }
      Reap();
      auto finished = std::make_shared<std::atomic<bool>>(false);
      std::lock_guard<std::mutex> lock(mu_);
      conns_.push_back(Connection{socket, std::thread([this, socket, finished] {
                                    ServeConnection(*socket, handler_);
                                    finished->store(true);
                                  }),
                                  finished});
    }
  }

  void Reap() {
    std::list<Connection> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->finished->load()) {
          done.splice(done.end(), conns_, it++);
        } else {
          ++it;
        }
      }
    }
    for (auto& c : done) c.thread.join();
  }

  asio::io_context io_;
  typename Protocol::acceptor acceptor_;
  typename Protocol::endpoint endpoint_;
  HttpHandler handler_;
  std::string address_;
  int port_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<Connection> conns_;  // GUARDED_BY(mu_)
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              HttpHandler handler) {
  if (absl::StartsWith(address, "unix:")) {
    std::string path = address.substr(5);
    if (path.empty()) return absl::InvalidArgumentError("listen address 'unix:': empty path");
    ::unlink(path.c_str());
    auto server = std::make_unique<ServerImpl<asio::local::stream_protocol>>(
        asio::local::stream_protocol::endpoint(path), std::move(handler), address, 0);
    auto st = server->Listen();
    if (!st.ok()) return st;
    return std::unique_ptr<HttpServer>(std::move(server));
  }
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", address, "': expected HOST:PORT or unix:PATH"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  beast::error_code ec;
  auto ip = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) {
    // A host name: its first address.
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    auto found = resolver.resolve(host, std::to_string(port), asio::ip::tcp::resolver::passive, ec);
    if (ec || found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address '", address, "': cannot resolve '", host, "'"));
    }
    ip = found.begin()->endpoint().address();
  }
  auto server = std::make_unique<ServerImpl<asio::ip::tcp>>(
      asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port)), std::move(handler), address, port);
  auto st = server->Listen();
  if (!st.ok()) return st;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace flotilla
