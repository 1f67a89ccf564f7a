#include "mirror_proxy.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::environments {
namespace {

constexpr int kIdleMs = 120'000;  // a connection silent this long is closed

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int ConnectTo(const std::string& host, int port) {
  struct addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (struct addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

// Copies both ways until both sides have finished (or `stop` becomes readable).
void Relay(int a, int b, int stop) {
  bool a_open = true, b_open = true;
  char buf[65536];
  while (a_open || b_open) {
    struct pollfd p[3] = {{a_open ? a : -1, POLLIN, 0}, {b_open ? b : -1, POLLIN, 0}, {stop, POLLIN, 0}};
    int n = ::poll(p, 3, kIdleMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || (p[2].revents & POLLIN) != 0) return;
    for (int i = 0; i < 2; ++i) {
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      int from = i == 0 ? a : b, to = i == 0 ? b : a;
      ssize_t r = ::recv(from, buf, sizeof(buf), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || !WriteAll(to, buf, static_cast<size_t>(r))) {
        ::shutdown(to, SHUT_WR);
        (i == 0 ? a_open : b_open) = false;
      }
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MirrorProxy>> MirrorProxy::Start(int netns_fd, std::set<std::string> hosts) {
  std::unique_ptr<MirrorProxy> p(new MirrorProxy());
  p->hosts_ = std::move(hosts);
  if (::pipe2(p->stop_pipe_, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  // The socket belongs to the namespace it is made in: make it on a thread that enters the
  // sandbox's namespace (the thread ends there; the rest of the process never moves).
  int made = -1, err = 0;
  std::thread in_ns([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    made = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (made < 0) err = errno;
  });
  in_ns.join();
  if (made < 0) return ErrnoStatus("making the proxy socket in the build sandbox's network namespace", err);
  p->listen_fd_ = made;
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(made, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(made, 64) != 0 ||
      ::getsockname(made, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus("listening on the build sandbox's loopback");
  }
  p->port_ = ntohs(addr.sin_port);
  p->acceptor_ = std::thread([raw = p.get()] { raw->AcceptLoop(); });
  return p;
}

MirrorProxy::~MirrorProxy() {
  if (stop_pipe_[1] >= 0) (void)!::write(stop_pipe_[1], "x", 1);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    conns.swap(connections_);
  }
  for (std::thread& t : conns) t.join();
  for (int fd : {listen_fd_, stop_pipe_[0], stop_pipe_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void MirrorProxy::AcceptLoop() {
  for (;;) {
    struct pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((p[1].revents & POLLIN) != 0) return;
    int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.push_back(c);
    connections_.emplace_back([this, c] { Serve(c); });
  }
}

void MirrorProxy::Serve(int client) {
  int upstream = -1;
  auto forget = [this](int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    ::close(fd);
  };
  std::string head;
  char buf[8192];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
    struct pollfd p[2] = {{client, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, kIdleMs) <= 0 || (p[1].revents & POLLIN) != 0) break;
    ssize_t r = ::recv(client, buf, sizeof(buf), 0);
    if (r <= 0) break;
    head.append(buf, static_cast<size_t>(r));
  }
  size_t eol = head.find("\r\n");
  std::string line = head.substr(0, eol == std::string::npos ? 0 : eol);
  std::string method = line.substr(0, line.find(' '));
  std::string target = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
  target = target.substr(0, target.find(' '));
  std::string host;
  int port = 0;
  const bool tunnel = method == "CONNECT";
  if (tunnel) {
    host = target.substr(0, target.rfind(':'));
    (void)absl::SimpleAtoi(target.substr(target.rfind(':') + 1), &port);
  } else if (absl::StartsWith(absl::AsciiStrToLower(target), "http://")) {
    std::string authority = target.substr(7, target.find('/', 7) - 7);
    host = authority.substr(0, authority.find(':'));
    port = 80;
    if (authority.find(':') != std::string::npos) (void)absl::SimpleAtoi(authority.substr(authority.find(':') + 1), &port);
  }
  host = absl::AsciiStrToLower(host);
  const bool allowed = hosts_.count(host) > 0 && port == (tunnel ? 443 : 80);
  if (allowed) upstream = ConnectTo(host, port);
  if (upstream < 0) {
    if (!allowed) refused_++;
    std::string body = allowed ? absl::StrCat("flotilla build: cannot reach the apt mirror ", host, "\n")
                               : absl::StrCat("flotilla build: ", host.empty() ? target : host,
                                              " is unreachable from the build sandbox: only this machine's apt "
                                              "mirrors are\n");
    std::string reply = absl::StrCat(allowed ? "HTTP/1.1 502 Bad Gateway" : "HTTP/1.1 403 Forbidden",
                                     "\r\nContent-Type: text/plain\r\nContent-Length: ", body.size(),
                                     "\r\nConnection: close\r\n\r\n", body);
    WriteAll(client, reply.data(), reply.size());
    forget(client);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.push_back(upstream);
  }
  bool ok;
  if (tunnel) {
    static const std::string kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
    ok = WriteAll(client, kEstablished.data(), kEstablished.size());
    std::string rest = head.substr(head.find("\r\n\r\n") + 4);
    ok = ok && WriteAll(upstream, rest.data(), rest.size());
  } else {
    ok = WriteAll(upstream, head.data(), head.size());
  }
  if (ok) Relay(client, upstream, stop_pipe_[0]);
  forget(upstream);
  forget(client);
}

}  // namespace flotilla::environments
