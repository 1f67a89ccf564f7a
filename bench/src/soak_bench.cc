#include "flotilla/bench/soak_bench.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/app/embedded_worker.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/common/unique_fd.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/sandbox/zygote_main.h"
#include "sandbox_cycle.h"

namespace flotilla::bench {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

int CountEntries(const fs::path& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

int OpenFds() { return CountEntries("/proc/self/fd"); }

int Mounts() {
  std::ifstream in("/proc/self/mountinfo");
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Directories under "<hierarchy>/<prefix>" in every cgroup hierarchy (v1 controllers and v2).
int Cgroups(const std::string& prefix) {
  int n = 0;
  std::error_code ec;
  for (auto h = fs::directory_iterator("/sys/fs/cgroup", ec); !ec && h != fs::directory_iterator(); h.increment(ec)) {
    const fs::path top = h->path() / prefix;
    if (!fs::is_directory(top, ec)) continue;
    std::error_code walk;
    for (auto it = fs::recursive_directory_iterator(top, walk); !walk && it != fs::recursive_directory_iterator();
         it.increment(walk)) {
      if (it->is_directory()) ++n;
    }
  }
  return n;
}

// The cgroup v2 hierarchy: the root on a pure v2 host, "unified" on a hybrid one.
fs::path UnifiedHierarchy() {
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers", ec)) return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/unified";
}

// BPF links that belong to the soak: link fds this process holds, and cgroup links attached
// to a cgroup under the soak's prefix (a cgroup v2 id is its directory's inode number). Links
// of other processes on the host are not counted.
int BpfLinks(const std::string& prefix) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/self/fd", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path target = fs::read_symlink(it->path(), ec);
    if (!ec && target.string() == "anon_inode:bpf_link") ++n;
  }
  std::unordered_set<uint64_t> ours;
  const fs::path top = UnifiedHierarchy() / prefix;
  std::error_code walk;
  for (auto it = fs::recursive_directory_iterator(top, walk); !walk && it != fs::recursive_directory_iterator();
       it.increment(walk)) {
    struct stat st {};
    if (it->is_directory() && ::stat(it->path().c_str(), &st) == 0) ours.insert(st.st_ino);
  }
  struct stat st {};
  if (::stat(top.c_str(), &st) == 0) ours.insert(st.st_ino);
  for (__u32 id = 0; bpf_link_get_next_id(id, &id) == 0;) {
    UniqueFd link(bpf_link_get_fd_by_id(id));
    if (link.get() < 0) continue;
    bpf_link_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(link.get(), &info, &len) != 0) continue;
    if (info.type == BPF_LINK_TYPE_CGROUP && ours.contains(info.cgroup.cgroup_id)) ++n;
  }
  return n;
}

uint64_t RssKib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    uint64_t kib = 0;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
  }
  return 0;
}

// The first error of any loop; the loops stop when one is set.
class FirstError {
 public:
  void Set(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = s;
    failed_ = true;
  }
  bool failed() const { return failed_.load(); }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  mutable std::mutex mu_;
  absl::Status status_;
  std::atomic<bool> failed_{false};
};


// One chat completion over a fresh connection; `mode` 0: whole answer, 1: streamed to the end,
// 2: streamed and dropped after the first bytes (a client that goes away mid-stream).
absl::Status ChatRequest(int port, int session, int mode, int max_tokens) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("soak: connect to the worker: ", std::strerror(errno)));
  }
  const std::string body = absl::StrCat(R"({"model":"default","max_tokens":)", max_tokens,
                                        R"(,"stream":)", mode == 0 ? "false" : "true",
                                        R"(,"messages":[{"role":"user","content":"soak turn )", session, R"("}]})");
  const std::string request = absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\n",
                                           "Content-Type: application/json\r\nConnection: close\r\n",
                                           "X-Flotilla-Session: soak-", session, "\r\nContent-Length: ", body.size(),
                                           "\r\n\r\n", body);
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("soak: send to the worker failed");
  }
  std::string answer;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    if (mode == 2) break;
  }
  if (answer.rfind("HTTP/1.1 200", 0) != 0) {
    return absl::InternalError(absl::StrCat("soak: chat completion answered '", answer.substr(0, 200), "'"));
  }
  return absl::OkStatus();
}

struct Sample {
  int fds = 0, mounts = 0, cgroups = 0, bpf_links = 0;
  int64_t kv_pages = 0;  // pages referenced by the engine's sequences
  uint64_t rss_kib = 0;
};

Sample Take(const std::string& prefix, const inference::Engine* engine) {
  return Sample{OpenFds(), Mounts(), Cgroups(prefix), BpfLinks(prefix),
                engine == nullptr ? 0 : static_cast<int64_t>(engine->Stats().kv_pages_used), RssKib()};
}

}  // namespace

absl::Status RunSoakBench(const SoakBenchOptions& o) {
  if (o.seconds <= 0 || o.warmup_seconds < 0 || o.sandbox_threads < 0 || o.session_threads < 0 ||
      o.sandbox_threads + o.session_threads == 0) {
    return absl::InvalidArgumentError("soak: --seconds must be positive and some --sandboxes or --sessions threads given");
  }
  // The soak runs in a mount namespace of its own, private to it, so that the mounts it counts
  // are its own and its sandboxes' host-side ones, not what other processes of the host mount
  // and unmount meanwhile.
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("soak: a private mount namespace: ", std::strerror(errno)));
  }
  ScratchDir scratch(fs::path(o.state_dir.empty() ? "/var/tmp" : o.state_dir) / NewId("flotilla-soak"));
  std::error_code ec;
  fs::create_directories(scratch.path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("--state-dir ", scratch.path().string(), ": ", ec.message()));
  struct rlimit nofile {};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &nofile);

  const std::string prefix = NewId("flotilla-soak");
  sandbox::RuntimeOptions runtime_options;
  runtime_options.state_dir = (scratch.path() / "sandboxes").string();
  runtime_options.cgroup_prefix = prefix;
  runtime_options.zygote_binary = sandbox::SiblingZygoteExecutable();
  std::unique_ptr<sandbox::Runtime> runtime;
  if (o.sandbox_threads > 0) {
    ASSIGN_OR_RETURN(runtime, sandbox::Runtime::Open(runtime_options));
  }
  std::unique_ptr<app::EmbeddedWorker> worker;
  int port = 0;
  if (o.session_threads > 0) {
    app::EmbeddedWorkerOptions w;
    w.state_dir = (scratch.path() / "worker").string();
    w.experiment = "soak";
    w.http_address = "127.0.0.1:0";
    w.engine.threads = 1;
    w.engine.kv_memory_bytes = 64ull << 20;
    ASSIGN_OR_RETURN(worker, app::EmbeddedWorker::Start(w));
    const std::string address = worker->http_address();
    if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) {
      return absl::InternalError(absl::StrCat("soak: worker address '", address, "'"));
    }
  }

  FirstError error;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> cycles{0}, requests{0};
  // The baseline is taken with the load paused: no sandbox or request in flight, as at the end.
  std::atomic<bool> paused{false};
  std::atomic<int> idle{0};
  auto hold_while_paused = [&] {
    if (!paused) return;
    ++idle;
    while (paused && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --idle;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < o.sandbox_threads; ++t) {
    threads.emplace_back([&] {
      while (!stop && !error.failed()) {
        hold_while_paused();
        absl::Status s = SandboxCycle(*runtime, nullptr);
        if (!s.ok()) return error.Set(s);
        ++cycles;
      }
    });
  }
  for (int t = 0; t < o.session_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop && !error.failed(); ++i) {
        hold_while_paused();
        const int mode = i % 8 == 7 ? 2 : (i % 4 == 3 ? 1 : 0);
        const int session = t * 1'000'000 + i;
        absl::Status s = ChatRequest(port, session, mode, o.max_tokens);
        if (!s.ok()) return error.Set(s);
        // As a scaffold does at an episode's end: the session's trajectory is final.
        auto closed = worker->service().CloseSession(absl::StrCat("soak-", session), v1::OK, 0.0, "soak");
        if (!closed.ok()) return error.Set(closed.status());
        ++requests;
      }
    });
  }
  auto wait = [&](int seconds) {
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < end && !error.failed()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  const int load_threads = static_cast<int>(threads.size());
  // Dropped streams end on the worker's side a little later, and the runtime prepares its next
  // sandbox in the background: a sample is taken once two in a row 500 ms apart agree.
  const inference::Engine* engine = worker ? &worker->engine() : nullptr;
  auto settled = [&] {
    Sample a = Take(prefix, engine);
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      Sample b = Take(prefix, engine);
      if (a.fds == b.fds && a.mounts == b.mounts && a.cgroups == b.cgroups && a.bpf_links == b.bpf_links &&
          a.kv_pages == b.kv_pages) {
        return b;
      }
      a = b;
    }
    return a;
  };
  wait(o.warmup_seconds);
  paused = true;
  while (idle.load() < load_threads && !error.failed()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const Sample base = settled();
  const int64_t warm_cycles = cycles.load(), warm_requests = requests.load();
  paused = false;
  wait(o.seconds);
  paused = true;
  while (idle.load() < load_threads && !error.failed()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const Sample end = settled();
  stop = true;
  for (auto& th : threads) th.join();
  RETURN_IF_ERROR(error.status());
  const uint64_t rss_end = end.rss_kib;
  std::printf("soak.seconds=%d\n", o.seconds);
  std::printf("soak.sandbox_threads=%d\n", o.sandbox_threads);
  std::printf("soak.session_threads=%d\n", o.session_threads);
  std::printf("soak.sandbox_cycles=%lld\n", static_cast<long long>(cycles.load() - warm_cycles));
  std::printf("soak.sandbox_cycles_per_s=%.1f\n", (cycles.load() - warm_cycles) / double(o.seconds));
  std::printf("soak.chat_requests=%lld\n", static_cast<long long>(requests.load() - warm_requests));
  std::printf("soak.rss_after_warmup_mib=%.1f\n", base.rss_kib / 1024.0);
  std::printf("soak.rss_end_mib=%.1f\n", rss_end / 1024.0);
  std::printf("soak.leaked_fds=%d\n", end.fds - base.fds);
  std::printf("soak.leaked_mounts=%d\n", end.mounts - base.mounts);
  std::printf("soak.leaked_cgroups=%d\n", end.cgroups - base.cgroups);
  std::printf("soak.bpf_links_baseline=%d\n", base.bpf_links);
  std::printf("soak.kv_pages_baseline=%lld\n", static_cast<long long>(base.kv_pages));
  std::printf("soak.leaked_bpf_links=%d\n", end.bpf_links - base.bpf_links);
  std::printf("soak.leaked_kv_pages=%lld\n", static_cast<long long>(end.kv_pages - base.kv_pages));
  std::printf("soak.rss_growth_frac=%.4f\n",
              base.rss_kib == 0 ? 0.0 : static_cast<double>(rss_end) / static_cast<double>(base.rss_kib) - 1.0);
  worker.reset();
  runtime.reset();
  std::printf("soak.cgroups_after_close=%d\n", Cgroups(prefix));
  std::fflush(stdout);
  return absl::OkStatus();
}

void RegisterSoakBench(CLI::App& bench, int* exit_code) {
  auto options = std::make_shared<SoakBenchOptions>();
  CLI::App* sub = bench.add_subcommand("soak", "Churn sandboxes and worker sessions; report leaked fds, mounts, cgroups and RSS growth");
  sub->add_option("--seconds", options->seconds, "measured load after the warm-up")->capture_default_str();
  sub->add_option("--warmup", options->warmup_seconds, "warm-up seconds before the baseline")->capture_default_str();
  sub->add_option("--sandboxes", options->sandbox_threads, "concurrent create->exec->destroy loops")->capture_default_str();
  sub->add_option("--sessions", options->session_threads, "concurrent chat-completion clients")->capture_default_str();
  sub->add_option("--max-tokens", options->max_tokens, "tokens per completion")->capture_default_str();
  sub->add_option("--state-dir", options->state_dir, "where the run's own fresh state directory goes (default /var/tmp)");
  sub->callback([options, exit_code] {
    absl::Status s = RunSoakBench(*options);
    if (!s.ok()) {
      std::fprintf(stderr, "flotilla bench soak: %s\n", s.ToString().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace flotilla::bench
