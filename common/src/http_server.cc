#include "flotilla/common/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <list>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "flotilla/common/logging.h"
#include "http_connection.h"

namespace flotilla {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using http_internal::ReadDeadline;

constexpr std::string_view kBusy =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    "Content-Length: 55\r\n\r\n{\"error\":{\"message\":\"too many connections, try again\"}}";

template <class Protocol>
class ServerImpl : public HttpServer {
 public:
  ServerImpl(typename Protocol::endpoint endpoint, HttpHandler handler, std::string display, int port,
             const HttpServerOptions& options)
      : acceptor_(io_), handler_(std::move(handler)), address_(std::move(display)), port_(port),
        options_(options) {
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
    watchdog_thread_ = std::thread([this] { Watchdog(); });
    return absl::OkStatus();
  }

  std::string address() const override { return address_; }
  int port() const override { return port_; }
  size_t open_connections() const override {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& c : conns_) n += c.finished->load() ? 0 : 1;
    return n;
  }

  void Stop() override {
    if (stopping_.exchange(true)) return;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    {
      absl::MutexLock lock(&mu_);
      watchdog_stop_ = true;
    }
    if (watchdog_thread_.joinable()) watchdog_thread_.join();
    beast::error_code ec;
    acceptor_.close(ec);
    std::list<Connection> conns;
    {
      absl::MutexLock lock(&mu_);
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
    std::shared_ptr<ReadDeadline> deadline;
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
      absl::MutexLock lock(&mu_);
      if (conns_.size() >= options_.max_connections) {
        // Refused without a thread: the answer fits the socket's send buffer of a new connection.
        (void)!::send(socket->native_handle(), kBusy.data(), kBusy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        socket->close(ec);
        continue;
      }
      auto finished = std::make_shared<std::atomic<bool>>(false);
      auto deadline = std::make_shared<ReadDeadline>();
      conns_.push_back(Connection{socket, std::thread([this, socket, finished, deadline] {
                                    http_internal::ServeConnection(*socket, handler_, options_, deadline.get());
                                    finished->store(true);
                                  }),
                                  finished, deadline});
    }
  }

  // Shuts the reading side of connections whose request is overdue (ServeConnection then
  // answers 408 or closes) and joins the threads of finished ones, so idle and slow clients
  // cost nothing once their time is up, whether or not new clients arrive.
  void Watchdog() {
    const absl::Duration tick = absl::Milliseconds(
        std::clamp<int64_t>(options_.read_timeout.count() / 4, 10, 250));
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&watchdog_stop_), tick);
        if (watchdog_stop_) return;
        for (auto& c : conns_) {
          if (!c.finished->load() && c.deadline->Passed()) ::shutdown(c.socket->native_handle(), SHUT_RD);
        }
      }
      Reap();
    }
  }

  void Reap() {
    std::list<Connection> done;
    {
      absl::MutexLock lock(&mu_);
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
  const HttpServerOptions options_;
  std::thread accept_thread_;
  std::thread watchdog_thread_;
  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  std::list<Connection> conns_ ABSL_GUARDED_BY(mu_);
  bool watchdog_stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              HttpHandler handler,
                                                              const HttpServerOptions& options) {
  if (options.max_connections == 0 || options.read_timeout.count() <= 0) {
    return absl::InvalidArgumentError("HttpServerOptions: max_connections and read_timeout must be positive");
  }
  if (absl::StartsWith(address, "unix:")) {
    std::string path = address.substr(5);
    if (path.empty()) return absl::InvalidArgumentError("listen address 'unix:': empty path");
    ::unlink(path.c_str());
    auto server = std::make_unique<ServerImpl<asio::local::stream_protocol>>(
        asio::local::stream_protocol::endpoint(path), std::move(handler), address, 0, options);
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
      asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port)), std::move(handler), address, port, options);
  auto st = server->Listen();
  if (!st.ok()) return st;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace flotilla
