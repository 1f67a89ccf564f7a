#include "flotilla/worker/sandbox_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/logging.h"

namespace flotilla::worker {
namespace {

constexpr char kDir[] = "/run/flotilla-endpoint";

// Protocol on stdout: "READY", "C <n>" (accepted), "D <n> <base64>" (bytes from the client),
// "E <n>" (client closed). Answers: files <dir>/<n>/<seq> then <seq>.ok; <dir>/<n>/end closes;
// <dir>/stop ends the forwarder.
constexpr char kForwarder[] = R"PY(
import base64, os, socket, sys, threading, time
port, root = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
def emit(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
def stopped():
    return os.path.exists(os.path.join(root, "stop"))
def upstream(n, conn):
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            emit("D %d %s" % (n, base64.b64encode(data).decode()))
    except OSError:
        pass
    emit("E %d" % n)
def downstream(n, conn):
    d, seq = os.path.join(root, str(n)), 0
    while not stopped():
        name = os.path.join(d, "%08d" % seq)
        if os.path.exists(name + ".ok"):
            with open(name, "rb") as f:
                data = f.read()
            try:
                conn.sendall(data)
            except OSError:
                break
            seq += 1
            continue
        if os.path.exists(os.path.join(d, "end")):
            break
        time.sleep(0.002)
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
srv.settimeout(0.2)
emit("READY")
n = 0
while not stopped():
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        continue
    n += 1
    emit("C %d" % n)
    threading.Thread(target=upstream, args=(n, conn), daemon=True).start()
    threading.Thread(target=downstream, args=(n, conn), daemon=True).start()
)PY";

// The same forwarder for Node.js, for sandboxes that carry an agent's node but no python3 (a
// task environment built from debian:bookworm-slim). Half-open sockets: a client that shuts
// its side still gets the answer.
constexpr char kNodeForwarder[] = R"JS(
'use strict';
const fs = require('fs'), net = require('net'), path = require('path');
const port = Number(process.argv[2]), root = process.argv[3];
const emit = (line) => process.stdout.write(line + '\n');
const stopped = () => fs.existsSync(path.join(root, 'stop'));
let n = 0;
const srv = net.createServer({ allowHalfOpen: true }, (conn) => {
  const id = ++n;
  emit('C ' + id);
  let closed = false;
  const close = () => { if (!closed) { closed = true; emit('E ' + id); } };
  conn.on('data', (d) => emit('D ' + id + ' ' + d.toString('base64')));
  conn.on('end', close);
  conn.on('error', close);
  const dir = path.join(root, String(id));
  let seq = 0;
  const drain = () => {
    for (;;) {
      const name = path.join(dir, String(seq).padStart(8, '0'));
      if (!fs.existsSync(name + '.ok')) return;
      if (!conn.destroyed) conn.write(fs.readFileSync(name));
      seq++;
    }
  };
  const poll = () => {
    drain();
    if (fs.existsSync(path.join(dir, 'end')) || stopped()) {
      drain();
      conn.end();
      return;
    }
    setTimeout(poll, 2);
  };
  poll();
});
srv.listen(port, '127.0.0.1', () => emit('READY'));
setInterval(() => { if (stopped()) process.exit(0); }, 200);
)JS";

class EndpointImpl : public SandboxEndpoint {
 public:
  EndpointImpl(SandboxClient* client, std::string sandbox_id, int sandbox_port, int worker_port,
               std::string node)
      : client_(client), sandbox_id_(std::move(sandbox_id)), sandbox_port_(sandbox_port),
        worker_port_(worker_port), node_(std::move(node)) {}
  ~EndpointImpl() override { Stop(); }

  absl::Status Begin() {
    absl::Status st = client_->PutFile(sandbox_id_, Script(), node_.empty() ? kForwarder : kNodeForwarder, 0644);
    if (!st.ok()) return st;
    exec_thread_ = std::thread([this] { RunForwarder(); });
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return ready_ || exited_; }) || !ready_) {
      return absl::UnavailableError(absl::StrCat("sandbox endpoint: the forwarder did not start: ", exit_detail_));
    }
    return absl::OkStatus();
  }

  std::string base_url() const override { return absl::StrCat("http://127.0.0.1:", sandbox_port_); }
  int connections() const override { return connections_.load(); }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    (void)client_->PutFile(sandbox_id_, absl::StrCat(kDir, "/tunnel/stop"), "", 0644);
    if (exec_thread_.joinable()) exec_thread_.join();
    std::map<int, Conn> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns.swap(conns_);
    }
    for (auto& [n, c] : conns) {
      ::shutdown(c.fd, SHUT_RDWR);
      if (c.pump.joinable()) c.pump.join();
      ::close(c.fd);
    }
  }

 private:
  std::string Script() const { return absl::StrCat(kDir, node_.empty() ? "/forwarder.py" : "/forwarder.js"); }

  struct Conn {
    int fd = -1;
    std::thread pump;
  };

  void RunForwarder() {
    v1::ExecRequest req;
    req.set_sandbox_id(sandbox_id_);
    if (node_.empty()) {
      for (const char* a : {"python3", "-u"}) req.add_argv(a);
    } else {
      req.add_argv(node_);
    }
    req.add_argv(Script());
    req.add_argv(absl::StrCat(sandbox_port_));
    req.add_argv(absl::StrCat(kDir, "/tunnel"));
    req.set_output_limit_bytes(1ull << 40);
    auto out = client_->Exec(req, [this](std::string_view data) { OnOutput(data); });
    std::lock_guard<std::mutex> lock(mu_);
    exited_ = true;
    exit_detail_ = out.ok() ? absl::StrCat("exit ", out->exit_code, ": ", out->output.substr(0, 2000))
                            : std::string(out.status().message());
    cv_.notify_all();
  }

  void OnOutput(std::string_view data) {
    pending_.append(data);
    size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      HandleLine(line);
    }
  }

  void HandleLine(const std::string& line) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts[0] == "READY") {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = true;
      cv_.notify_all();
      return;
    }
    int n = 0;
    if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &n)) return;
    if (parts[0] == "C") {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(worker_port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        FLOG(warn, "sandbox endpoint: cannot reach the worker", {{"port", worker_port_}});
        ::close(fd);
        (void)client_->PutFile(sandbox_id_, absl::StrCat(kDir, "/tunnel/", n, "/end"), "", 0644);
        return;
      }
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      Conn& c = conns_[n];
      c.fd = fd;
      c.pump = std::thread([this, n, fd] { Pump(n, fd); });
    } else if (parts[0] == "D" && parts.size() == 3) {
      std::string bytes;
      if (!absl::Base64Unescape(parts[2], &bytes)) return;
      int fd = Fd(n);
      size_t off = 0;
      while (fd >= 0 && off < bytes.size()) {
        ssize_t w = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
    } else if (parts[0] == "E") {
      int fd = Fd(n);
      if (fd >= 0) ::shutdown(fd, SHUT_WR);
    }
  }

  int Fd(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(n);
    return it == conns_.end() ? -1 : it->second.fd;
  }

  // Worker -> sandbox: each read becomes a chunk file and its ".ok" marker.
  void Pump(int n, int fd) {
    const std::string dir = absl::StrCat(kDir, "/tunnel/", n);
    char buf[65536];
    for (int seq = 0;; ++seq) {
      ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
      if (r <= 0) break;
      std::string name = absl::StrFormat("%s/%08d", dir, seq);
      if (!client_->PutFile(sandbox_id_, name, std::string_view(buf, static_cast<size_t>(r)), 0644).ok() ||
          !client_->PutFile(sandbox_id_, name + ".ok", "", 0644).ok()) {
        break;
      }
    }
    (void)client_->PutFile(sandbox_id_, dir + "/end", "", 0644);
  }

  SandboxClient* client_;
  std::string sandbox_id_;
  int sandbox_port_;
  int worker_port_;
  std::string node_;  // empty: python3
  std::thread exec_thread_;
  std::string pending_;  // only the exec thread touches it
  std::atomic<int> connections_{0};
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;         // GUARDED_BY(mu_)
  bool exited_ = false;        // GUARDED_BY(mu_)
  std::string exit_detail_;    // GUARDED_BY(mu_)
  std::map<int, Conn> conns_;  // GUARDED_BY(mu_)
};

}  // namespace

absl::StatusOr<std::unique_ptr<SandboxEndpoint>> SandboxEndpoint::Start(SandboxClient* client,
                                                                        const std::string& sandbox_id,
                                                                        int sandbox_port, int worker_port,
                                                                        const std::string& node) {
  auto e = std::make_unique<EndpointImpl>(client, sandbox_id, sandbox_port, worker_port, node);
  absl::Status st = e->Begin();
  if (!st.ok()) return st;
  return std::unique_ptr<SandboxEndpoint>(std::move(e));
}

v1::NetworkRule EndpointNetworkRule(int sandbox_port) {
  v1::NetworkRule r;
  r.set_cidr("127.0.0.1/32");
  r.set_port(static_cast<uint32_t>(sandbox_port));
  return r;
}

}  // namespace flotilla::worker
