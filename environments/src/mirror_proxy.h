// MirrorProxy: the build sandbox's only way out, an HTTP proxy on the sandbox's own loopback
// that forwards to this machine's apt mirrors and refuses everything else.
//
// A sandbox's network namespace has loopback only. The proxy's listening socket is made inside
// that namespace (on a thread that enters it), so that 127.0.0.1:<port>() in the sandbox
// reaches it, while its accept loop and upstream connections run in the host's namespace.
// Requests: an absolute-URI request ("GET http://mirror/debian/... HTTP/1.1", what apt sends
// to a proxy) to an allowed host on port 80 is relayed as it is (HTTP/1.1 servers accept the
// absolute form); "CONNECT mirror:443" is tunnelled. Any other host gets "403 Forbidden" with
// a body saying that only the apt mirrors are reachable from the build sandbox.
//
// Thread-safety: Start and the destructor from one thread; the proxy runs its own threads
// (an accept loop and one per connection), all stopped and joined by the destructor.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::environments {

class MirrorProxy {
 public:
  // `netns_fd` is the sandbox's network namespace (borrowed); `hosts` the allowed host names.
  static absl::StatusOr<std::unique_ptr<MirrorProxy>> Start(int netns_fd, std::set<std::string> hosts);
  ~MirrorProxy();
  MirrorProxy(const MirrorProxy&) = delete;
  MirrorProxy& operator=(const MirrorProxy&) = delete;

  int port() const { return port_; }
  int refused() const { return refused_.load(); }  // requests to hosts that are not mirrors

 private:
  MirrorProxy() = default;
  void AcceptLoop();
  void Serve(int client);

  std::set<std::string> hosts_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<int> refused_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
  std::vector<int> open_fds_;  // client and upstream sockets, shut down when the proxy stops
};

}  // namespace flotilla::environments
