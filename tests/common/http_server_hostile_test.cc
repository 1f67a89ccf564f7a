// Hostile and broken clients against HttpServer over real TCP sockets: slow (slowloris) and idle
// clients are cut at read_timeout, over-limit headers and bodies and malformed chunked bodies
// are refused with their status, a client vanishing mid-stream stops the handler, connections
// past max_connections get 503 — and in every case the server keeps answering other clients
// and its connection threads and sockets are freed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/common/http_server.h"
#include "flotilla/common/unique_fd.h"
#include "gtest/gtest.h"

namespace flotilla {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

UniqueFd Connect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Everything the server sends until it closes the connection (or `within` passes).
std::string ReadUntilClosed(int fd, milliseconds within = milliseconds(5000)) {
  std::string out;
  const auto end = Clock::now() + within;
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Polls `cond` every 10 ms for up to `within`.
bool WaitFor(const std::function<bool()>& cond, milliseconds within = milliseconds(5000)) {
  const auto end = Clock::now() + within;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return cond();
}

int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

int FdCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

std::string StatusLine(const std::string& response) { return response.substr(0, response.find("\r\n")); }

// One request on a fresh connection, answered and closed.
std::string Roundtrip(int port, const std::string& path = "/ok") {
  UniqueFd fd = Connect(port);
  EXPECT_TRUE(SendAll(fd.get(), "GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  return ReadUntilClosed(fd.get());
}

class HostileClientTest : public ::testing::Test {
 protected:
  void StartServer(const HttpServerOptions& options) {
    auto s = HttpServer::Start("127.0.0.1:0", [this](const HttpRequest& req, HttpResponder& out) { Handle(req, out); },
                               options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  void Handle(const HttpRequest& req, HttpResponder& out) {
    if (req.path == "/stream") {
      out.StartStream(200, "text/event-stream");
      const std::string event = "data: " + std::string(1024, 'x') + "\n\n";
      int writes = 0;
      while (out.Write(event)) {
        if (++writes > 1'000'000) break;  // a client that never leaves: the test fails below
      }
      stream_writes_ = writes;
      stream_ended_ = true;
      return;
    }
    out.Send(200, "text/plain", "body " + std::to_string(req.body.size()));
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<int> stream_writes_{0};
  std::atomic<bool> stream_ended_{false};
};

TEST_F(HostileClientTest, SlowlorisIsCutAtReadTimeoutWhileOthersAreServed) {
  HttpServerOptions options;
  options.read_timeout = milliseconds(400);
  StartServer(options);
  UniqueFd slow = Connect(server_->port());
  const std::string header = "GET /ok HTTP/1.1\r\nHost: t\r\nX-Drip: " + std::string(200, 'a');
  const auto start = Clock::now();
  std::string answer;
  for (size_t i = 0; i < header.size(); ++i) {
    if (!SendAll(slow.get(), header.substr(i, 1))) break;
    EXPECT_EQ(StatusLine(Roundtrip(server_->port())), "HTTP/1.1 200 OK") << "byte " << i;
    pollfd p{slow.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) break;
  }
  answer = ReadUntilClosed(slow.get());
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_EQ(StatusLine(answer), "HTTP/1.1 408 Request Timeout");
  EXPECT_GE(took.count(), 400);
  EXPECT_LT(took.count(), 3000);
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
}

TEST_F(HostileClientTest, IdleConnectionsAreClosedAndTheirThreadsAndSocketsFreed) {
  HttpServerOptions options;
  options.read_timeout = milliseconds(500);
  StartServer(options);
  const int threads_before = ThreadCount();
  const int fds_before = FdCount();
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(Connect(server_->port()));
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 64; })) << server_->open_connections();
  EXPECT_EQ(ThreadCount(), threads_before + 64);
  EXPECT_EQ(StatusLine(Roundtrip(server_->port())), "HTTP/1.1 200 OK");
  // Each idle connection is closed without an answer once its read_timeout has passed.
  for (auto& fd : idle) EXPECT_EQ(ReadUntilClosed(fd.get()), "");
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return ThreadCount() == threads_before; })) << ThreadCount();
  idle.clear();
  EXPECT_TRUE(WaitFor([&] { return FdCount() == fds_before; })) << FdCount() << " vs " << fds_before;
}

TEST_F(HostileClientTest, OverLimitHeaderGets431AndOverLimitBodyGets413) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  options.max_body_bytes = 1024;
  StartServer(options);
  struct Case {
    std::string name, request, status;
  };
  const std::vector<Case> cases = {
      {"huge header", "GET /ok HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(4096, 'h') + "\r\n\r\n",
       "HTTP/1.1 431 Request Header Fields Too Large"},
      {"announced body", "POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n",
       "HTTP/1.1 413 Payload Too Large"},
      {"chunked body", "POST /ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
                           std::string(2048, 'b') + "\r\n0\r\n\r\n",
       "HTTP/1.1 413 Payload Too Large"},
      {"malformed chunk size", "POST /ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nab\r\n0\r\n\r\n",
       "HTTP/1.1 400 Bad Request"},
      {"chunk longer than its size", "POST /ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcdef\r\n0\r\n\r\n",
       "HTTP/1.1 400 Bad Request"},
      {"bad request line", "GARBAGE\r\n\r\n", "HTTP/1.1 400 Bad Request"},
      {"at the limit", "POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\nConnection: close\r\n\r\n" +
                           std::string(1024, 'b'),
       "HTTP/1.1 200 OK"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    UniqueFd fd = Connect(server_->port());
    SendAll(fd.get(), c.request);
    const std::string answer = ReadUntilClosed(fd.get());
    EXPECT_EQ(StatusLine(answer), c.status);
    EXPECT_EQ(StatusLine(Roundtrip(server_->port())), "HTTP/1.1 200 OK");
  }
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
}

TEST_F(HostileClientTest, ClientVanishingMidStreamStopsTheHandler) {
  StartServer(HttpServerOptions{});
  {
    UniqueFd fd = Connect(server_->port());
    ASSERT_TRUE(SendAll(fd.get(), "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n"));
    // Read until the first event has arrived: the handler is inside its write loop.
    std::string got;
    char buf[256];
    while (got.find("data: x") == std::string::npos) {
      ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
    linger hard{1, 0};  // close with a reset, as a crashed client's kernel does
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  }
  ASSERT_TRUE(WaitFor([&] { return stream_ended_.load(); }));
  EXPECT_GT(stream_writes_.load(), 0);
  EXPECT_LT(stream_writes_.load(), 1'000'000);
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
  EXPECT_EQ(StatusLine(Roundtrip(server_->port())), "HTTP/1.1 200 OK");
}

TEST_F(HostileClientTest, ConnectionsPastTheLimitGet503UntilOthersClose) {
  HttpServerOptions options;
  options.max_connections = 4;
  StartServer(options);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 4; ++i) held.push_back(Connect(server_->port()));
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 4; }));
  const std::string refused = Roundtrip(server_->port());
  EXPECT_EQ(StatusLine(refused), "HTTP/1.1 503 Service Unavailable");
  EXPECT_NE(refused.find(R"({"error":{"message":"too many connections, try again"}})"), std::string::npos);
  held.clear();
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
  EXPECT_EQ(StatusLine(Roundtrip(server_->port())), "HTTP/1.1 200 OK");
}

TEST_F(HostileClientTest, ManyConcurrentClientsAreAllAnswered) {
  StartServer(HttpServerOptions{});
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 100; ++i) {
    clients.emplace_back([&] {
      if (StatusLine(Roundtrip(server_->port())) == "HTTP/1.1 200 OK") ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
}

TEST(HttpServerOptionsTest, RejectsZeroLimits) {
  HttpServerOptions options;
  options.max_connections = 0;
  auto s = HttpServer::Start("127.0.0.1:0", [](const HttpRequest&, HttpResponder&) {}, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla
