// `flotilla bench rollout --metrics-overhead`: what metrics and the dashboard cost the rollout.
//
// Each round runs the asynchronous mode twice on fresh platforms, once without observability
// (PlatformOptions::metrics off: no service records a figure, no HTTP server) and once with all
// of it (every service's figures, the episodes' worker figures, the worker's HTTP server with the
// dashboard, /metrics scraped every second and the dashboard's four APIs read every fifth second,
// as its page polls), the order alternating per round so that a drifting machine load falls on
// both. Three figures, each per round and then their median with the range over rounds:
//   - throughput lost: 1 - (tokens/s with) / (tokens/s without);
//   - CPU per token added: (process CPU per token with) / (without) - 1;
//   - attributed CPU: what one second's requests cost the process, measured after the run on
//     the idle platform (a tick's requests made back to back, less the process's idle CPU over
//     the same time), times the ticks of the run, over the run's process CPU. It does not see
//     what observability costs the engine indirectly (a lock the collector shares, caches), which
//     the first two include, but it does not move with the load of other work on the machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/status.h"
#include "rollout_mode.h"

namespace flotilla::bench {
namespace {

// One GET over loopback, as a Prometheus server or the dashboard's page does; the status code
// (0 when the server could not be reached).
int HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      std::string reply;
      char buf[65536];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) reply.append(buf, static_cast<size_t>(n));
      if (reply.size() > 12) status = std::atoi(reply.c_str() + 9);  // "HTTP/1.1 200 OK"
    }
  }
  ::close(fd);
  return status;
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double LoadAverage1m() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// One second of a watcher: /metrics each tick, the dashboard's APIs every fifth.
std::vector<std::string> PathsOfTick(uint64_t tick) {
  std::vector<std::string> paths = {"/metrics"};
  if (tick % 5 == 0) {
    for (const char* p : {"/api/metrics_log", "/api/fleet", "/api/trajectories?limit=200", "/api/eval_jobs"}) {
      paths.push_back(p);
    }
  }
  return paths;
}

// Process CPU (ms) of one tick's requests: kTicks ticks back to back on the idle platform, less
// the process's CPU over as long idle. The server's threads, the collectors, the dashboard's
// sources and the client's side of the requests all count.
double TickCpuMs(int port, uint64_t* failed) {
  constexpr uint64_t kTicks = 50;
  Stopwatch wall;
  const double cpu0 = ProcessCpuSeconds();
  for (uint64_t tick = 0; tick < kTicks; ++tick) {
    for (const std::string& p : PathsOfTick(tick)) *failed += HttpGet(port, p) == 200 ? 0 : 1;
  }
  const double busy = ProcessCpuSeconds() - cpu0;
  const double cpu1 = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(wall.ElapsedMillis() / 1000.0));
  const double idle = ProcessCpuSeconds() - cpu1;
  return std::max(0.0, busy - idle) * 1e3 / kTicks;
}

struct Observed {
  double seconds = 0, cpu_s = 0;
  uint64_t tokens = 0, ticks = 0, scrapes = 0, failed_scrapes = 0;
  double tick_cpu_ms = 0;  // with observability: one tick's requests, measured after the run
  double tokens_per_s() const { return tokens / std::max(seconds, 1e-9); }
  double cpu_per_token() const { return cpu_s / std::max<double>(static_cast<double>(tokens), 1); }
};

// The asynchronous mode on a fresh embedded platform, with or without observability.
absl::StatusOr<Observed> RunObserved(const RolloutBenchOptions& o, const app::PlatformOptions& base,
                                     const inference::ModelConfig& model, const std::string& weights, double train_s,
                                     bool observed, int run) {
  app::PlatformOptions po = base;
  po.worker.state_dir = absl::StrCat(base.worker.state_dir, "-observed-", run);
  po.metrics = observed;
  if (observed) po.worker.http_address = "127.0.0.1:0";
  ASSIGN_OR_RETURN(std::unique_ptr<app::EmbeddedPlatform> platform, app::EmbeddedPlatform::Start(po));
  inference::Engine& engine = platform->worker().engine();
  if (absl::Status s = engine.LoadModel("bench", model, weights, 0); !s.ok()) return s;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ticks{0}, scrapes{0}, failed{0};
  std::thread scraper;
  int port = 0;
  if (observed) {
    const std::string address = platform->worker().http_address();
    port = std::atoi(address.c_str() + address.rfind(':') + 1);
    scraper = std::thread([&] {
      for (uint64_t tick = 0; !stop.load(); ++tick) {
        for (const std::string& p : PathsOfTick(tick)) (HttpGet(port, p) == 200 ? scrapes : failed).fetch_add(1);
        ticks.fetch_add(1);
        for (int i = 0; i < 10 && !stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  const double cpu0 = ProcessCpuSeconds();
  absl::StatusOr<ModeResult> mode = RunMode(o, engine, platform->sandboxes(), weights, o.eta, train_s,
                                            observed ? &platform->metrics() : nullptr);
  const double cpu_s = ProcessCpuSeconds() - cpu0;
  stop = true;
  if (scraper.joinable()) scraper.join();
  if (!mode.ok()) return mode.status();
  const ModeResult& m = *mode;
  Observed r;
  r.seconds = m.seconds;
  r.cpu_s = cpu_s;
  r.tokens = m.tokens;
  r.ticks = ticks.load();
  r.scrapes = scrapes.load();
  r.failed_scrapes = failed.load();
  if (observed) r.tick_cpu_ms = TickCpuMs(port, &r.failed_scrapes);
  platform->Stop();
  return r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// name=median, name_min, name_max and name_rounds (every round's figure, in order).
void PrintSpread(const std::string& name, const std::vector<double>& per_round) {
  std::vector<std::string> each;
  for (double v : per_round) each.push_back(absl::StrFormat("%.4f", v));
  std::cout << absl::StrFormat("%s=%.4f\n%s_min=%.4f\n%s_max=%.4f\n%s_rounds=%s\n", name, Median(per_round), name,
                               *std::min_element(per_round.begin(), per_round.end()), name,
                               *std::max_element(per_round.begin(), per_round.end()), name,
                               absl::StrJoin(each, ","));
}

}  // namespace

int RunMetricsOverhead(const RolloutBenchOptions& o, const app::PlatformOptions& po,
                       const inference::ModelConfig& model, const std::string& weights, double train_s) {
  const double load_start = LoadAverage1m();
  Observed off, on;  // pooled over the rounds
  std::vector<double> lost, cpu_added, attributed, tick_ms;
  for (uint32_t round = 0; round < std::max(o.overhead_rounds, 1u); ++round) {
    Observed pair[2];  // [0] without, [1] with
    for (int k = 0; k < 2; ++k) {
      const bool observed = (round % 2 == 0) == (k == 1);  // (off, on), (on, off), ...
      auto r = RunObserved(o, po, model, weights, train_s, observed, static_cast<int>(2 * round + k));
      if (!r.ok()) {
        std::cerr << "bench rollout: " << (observed ? "observed" : "bare") << " run failed: " << r.status() << "\n";
        return 1;
      }
      pair[observed ? 1 : 0] = *r;
      Observed& sum = observed ? on : off;
      sum.seconds += r->seconds;
      sum.cpu_s += r->cpu_s;
      sum.tokens += r->tokens;
      sum.scrapes += r->scrapes;
      sum.failed_scrapes += r->failed_scrapes;
    }
    const Observed& a = pair[0];
    const Observed& b = pair[1];
    lost.push_back(1.0 - b.tokens_per_s() / std::max(a.tokens_per_s(), 1e-9));
    cpu_added.push_back(b.cpu_per_token() / std::max(a.cpu_per_token(), 1e-15) - 1.0);
    attributed.push_back(static_cast<double>(b.ticks) * b.tick_cpu_ms / 1e3 / std::max(b.cpu_s, 1e-9));
    tick_ms.push_back(b.tick_cpu_ms);
    std::cerr << absl::StrFormat(
        "bench rollout: round %d: without %.0f tokens/s %.4f ms CPU/token, with %.0f tokens/s %.4f ms CPU/token "
        "(%d ticks, %.3f ms CPU each): throughput lost %.4f, CPU per token added %.4f, attributed %.4f\n",
        round + 1, a.tokens_per_s(), 1e3 * a.cpu_per_token(), b.tokens_per_s(), 1e3 * b.cpu_per_token(), b.ticks,
        b.tick_cpu_ms, lost.back(), cpu_added.back(), attributed.back());
  }
  std::cout << absl::StrFormat("rollout.backend=%s\nrollout.steps=%d\nrollout.prompts_per_step=%d\nrollout.rounds=%d\n",
                               o.backend, o.steps, o.prompts_per_step, lost.size());
  std::cout << absl::StrFormat("rollout.loadavg_1m_start=%.2f\nrollout.loadavg_1m_end=%.2f\n", load_start,
                               LoadAverage1m());
  std::cout << absl::StrFormat("rollout.tokens_per_s.without_metrics=%.1f\nrollout.tokens_per_s.with_metrics=%.1f\n",
                               off.tokens_per_s(), on.tokens_per_s());
  std::cout << absl::StrFormat("rollout.cpu_ms_per_token.without_metrics=%.4f\nrollout.cpu_ms_per_token.with_metrics=%.4f\n",
                               1e3 * off.cpu_per_token(), 1e3 * on.cpu_per_token());
  std::cout << absl::StrFormat("rollout.scrapes=%d\nrollout.failed_scrapes=%d\n", on.scrapes, on.failed_scrapes);
  std::cout << absl::StrFormat("rollout.metrics_tick_cpu_ms=%.3f\n", Median(tick_ms));
  // Medians of the per-round figures (a round's two runs are next to each other in time).
  PrintSpread("rollout.metrics_overhead_frac", lost);
  PrintSpread("rollout.metrics_cpu_overhead_frac", cpu_added);
  PrintSpread("rollout.metrics_attributed_cpu_frac", attributed);
  std::cout << absl::StrFormat("rollout.metrics_overhead_frac_pooled=%.4f\n",
                               1.0 - on.tokens_per_s() / std::max(off.tokens_per_s(), 1e-9));
  return on.failed_scrapes == 0 ? 0 : 1;
}

}  // namespace flotilla::bench
