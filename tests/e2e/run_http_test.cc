// A short real `flotilla run --http 127.0.0.1:0`, observed as an operator would while it trains:
// /metrics is scraped twice (every family of the engine, worker, node agent, scheduler and
// bridge is there, and the figures move between the scrapes), the dashboard is loaded in headless Chromium (reward
// curve with data, the fleet with execution classes, a trajectory with token overlays, no
// script errors; a screenshot per view is saved beside the test binary), then SIGINT stops the
// run and its metrics.jsonl holds one line per trainer step.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "flotilla/common/metrics_log.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/http_client.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

using testing::HttpCall;

using testing::Env;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr char kExperiment[] = R"(name: http-run
state_dir: runs/http-run
seed: 5
sandbox_policy: no-network
policy:
  model: {vocab_size: 272, n_layers: 1, d_model: 32, n_heads: 2, n_kv_heads: 2, head_dim: 16,
          n_experts: 2, top_k: 1, n_shared_experts: 1, expert_hidden: 32, max_context: 64}
  init: random
datasets:
  - {name: add, source: "builtin:arith?ops=+&max=9"}
rollout: {group_size: 4, groups_per_step: 2, max_in_flight: 16, staleness: 1, max_new_tokens: 4}
trainer: {sft_steps: 2, rl_steps: 100000, learning_rate: 0.001}
)";

// Every family a run exposes, one service after another.
const char* const kFamilies[] = {
    // engine
    "flotilla_engine_prefill_tokens_total", "flotilla_engine_decode_tokens_total", "flotilla_engine_steps_total",
    "flotilla_engine_interrupts_total", "flotilla_engine_batch_size", "flotilla_engine_kv_pages",
    "flotilla_engine_weight_version", "flotilla_engine_step_seconds", "flotilla_engine_weight_swap_stall_seconds",
    // worker: every RL sample is a worker session; the HTTP server's requests
    "flotilla_worker_sessions_opened_total", "flotilla_worker_turns_total",
    "flotilla_worker_tokens_total", "flotilla_worker_turn_seconds", "flotilla_worker_requests_total",
    "flotilla_worker_request_seconds",
    // node agent
    "flotilla_node_sandboxes", "flotilla_node_sandboxes_created_total", "flotilla_node_sandboxes_destroyed_total",
    "flotilla_node_sandbox_create_failures_total", "flotilla_node_sandbox_crashes_total",
    "flotilla_node_exec_stops_total", "flotilla_node_sandbox_create_seconds", "flotilla_node_sandbox_destroy_seconds",
    // scheduler
    "flotilla_scheduler_placements_total", "flotilla_scheduler_rejections_total", "flotilla_scheduler_no_capacity_total",
    "flotilla_scheduler_placement_latency_seconds", "flotilla_scheduler_nodes", "flotilla_scheduler_sandboxes",
    // trainer bridge
    "flotilla_bridge_step", "flotilla_bridge_policy_version", "flotilla_bridge_staleness_mean",
    "flotilla_bridge_stale_masked_tokens_total", "flotilla_bridge_weight_sync_ms", "flotilla_bridge_reward_mean",
    "flotilla_bridge_batch", "flotilla_bridge_trainer"};

struct Scrape {
  std::set<std::string> families;              // from the TYPE lines
  std::map<std::string, double> samples;       // "name{labels}" -> value
  double operator[](const std::string& key) const {
    auto it = samples.find(key);
    return it == samples.end() ? -1 : it->second;
  }
};

Scrape ParseExposition(const std::string& body) {
  Scrape s;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (line.substr(0, 7) == "# TYPE ") {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      s.families.insert(parts[2]);
      continue;
    }
    if (line.front() == '#') continue;
    size_t sp = line.rfind(' ');
    s.samples[std::string(line.substr(0, sp))] = std::stod(std::string(line.substr(sp + 1)));
  }
  return s;
}

class RunHttpTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  size_t LoggedSteps() {
    auto lines = ReadMetricsLog(dir_.file("runs/http-run/metrics.jsonl"));
    return lines.ok() ? lines->size() : 0;
  }
  // Waits until the metrics log has `n` lines; false when the run ended or time ran out.
  bool WaitForSteps(size_t n, int seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (LoggedSteps() >= n) return true;
      if (waitpid(pid_, nullptr, WNOHANG) != 0) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
  testing::TempDir dir_;
  pid_t pid_ = -1;
};

TEST_F(RunHttpTest, MetricsMoveDashboardDrawsAndTheLogHasOneLinePerStep) {
  std::ofstream(dir_.file("experiment.yaml")) << kExperiment;
  const std::string log = dir_.file("run.log");
  const std::string bin = std::filesystem::absolute(Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla").string();
  pid_ = fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    if (chdir(dir_.path().c_str()) != 0) _exit(126);
    FILE* f = freopen(log.c_str(), "w", stdout);
    if (f == nullptr) _exit(126);
    dup2(1, 2);
    execl(bin.c_str(), bin.c_str(), "run", "--fresh", "--http", "127.0.0.1:0", "experiment.yaml", nullptr);
    _exit(127);
  }
  // The dashboard's address, printed before training starts.
  int port = 0;
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::smatch m;
    std::string out = ReadFile(log);
    if (std::regex_search(out, m, std::regex(R"(dashboard on http://127\.0\.0\.1:([0-9]+)/)"))) port = std::stoi(m[1]);
    ASSERT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "flotilla run ended early:\n" << out;
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(port, 0) << ReadFile(log);

  ASSERT_TRUE(WaitForSteps(1, 240)) << ReadFile(log);
  auto first = HttpCall(port, "GET", "/metrics");
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const Scrape a = ParseExposition(first.body);
  // The dashboard's own reads between the scrapes (counted by route like any request).
  EXPECT_EQ(HttpCall(port, "GET", "/api/fleet").status, 200);
  ASSERT_TRUE(WaitForSteps(LoggedSteps() + 2, 240)) << ReadFile(log);
  const Scrape b = ParseExposition(HttpCall(port, "GET", "/metrics").body);

  for (const char* family : kFamilies) {
    EXPECT_EQ(a.families.count(family), 1u) << family << " missing from the first scrape";
    EXPECT_EQ(b.families.count(family), 1u) << family << " missing from the second scrape";
  }
  // Figures that move while the run trains and its server answers.
  for (const char* key : {"flotilla_engine_decode_tokens_total", "flotilla_engine_prefill_tokens_total",
                          "flotilla_engine_steps_total", "flotilla_engine_step_seconds_count", "flotilla_bridge_step",
                          "flotilla_worker_sessions_opened_total", "flotilla_worker_turns_total",
                          "flotilla_worker_requests_total{route=\"/metrics\",status=\"200\"}",
                          "flotilla_worker_request_seconds_count{route=\"/metrics\"}"}) {
    EXPECT_GT(b[key], a[key]) << key;
    EXPECT_GE(a[key] == -1 ? 0 : a[key], 0) << key;
  }
  // The first scrape counted once it was answered; the fleet read between them.
  EXPECT_EQ(a["flotilla_worker_requests_total{route=\"/metrics\",status=\"200\"}"], 0);
  EXPECT_EQ(b["flotilla_worker_requests_total{route=\"/metrics\",status=\"200\"}"], 1);
  EXPECT_EQ(b["flotilla_worker_requests_total{route=\"/api/fleet\",status=\"200\"}"], 1);
  // Every sample's own sandbox: placed by the scheduler, created by the node agent (best effort),
  // destroyed after its tests.
  EXPECT_GE(b["flotilla_scheduler_placements_total{unit=\"unit-0\"}"], 1);
  EXPECT_GT(b["flotilla_node_sandboxes_created_total{class=\"best_effort\"}"],
            a["flotilla_node_sandboxes_created_total{class=\"best_effort\"}"]);
  EXPECT_GE(b["flotilla_node_sandboxes_destroyed_total{class=\"best_effort\"}"], 1);
  EXPECT_GE(b["flotilla_node_sandbox_create_seconds_count{class=\"best_effort\"}"], 1);
  EXPECT_EQ(b["flotilla_node_sandbox_create_failures_total{reason=\"admission\"}"], 0);

  // The dashboard of the live run in headless Chromium.
  const bool have_chromium = ::access("/usr/bin/chromium", X_OK) == 0;
  if (have_chromium) {
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    const std::string shots = Env("FLOTILLA_BINARY_DIR", "build") + "/tests/e2e/run-http-screenshots";
    std::filesystem::create_directories(shots);
    auto chromium = [&](const std::string& args) {
      std::string cmd = "timeout 90 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
                        "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
                        "--virtual-time-budget=5000 --user-data-dir=" + dir_.file("chromium-profile") + " " + args +
                        " 2>/dev/null";
      int status = 0;
      std::string out = testing::RunShell(cmd, &status);
      EXPECT_EQ(status, 0) << cmd;
      return out;
    };
    // The fleet is live: sandboxes come and go with the samples, so the page is loaded again
    // (a few times at most) until it caught one; the node is drawn idle or not.
    const std::regex box("class=\"box [a-z]+ best-effort\" data-sandbox=\"[^\"]+\" data-class=\"best-effort\"");
    std::string dom;
    for (int attempt = 0; attempt < 5; ++attempt) {
      dom = chromium("--dump-dom " + base + "/");
      if (std::regex_search(dom, box)) break;
    }
    EXPECT_NE(dom.find("data-status=\"ready\""), std::string::npos) << dom.substr(0, 2000);
    EXPECT_EQ(dom.find("data-errors"), std::string::npos) << dom;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(dom, m, std::regex("data-metric=\"reward_mean\" data-points=\"([0-9]+)\""))) << dom;
    EXPECT_GE(std::stoi(m[1]), 3);
    EXPECT_NE(dom.find("<path class=\"line\""), std::string::npos);
    EXPECT_NE(dom.find("data-node=\"embedded\""), std::string::npos) << dom;
    EXPECT_TRUE(std::regex_search(dom, box)) << dom;
    EXPECT_TRUE(std::regex_search(dom, std::regex("data-trajectory=\"[^\"]+\""))) << dom;
    EXPECT_TRUE(std::regex_search(dom, std::regex("class=\"tok\" data-token-id=\"[0-9]+\" data-logprob=\"-?[0-9.e-]+\"")))
        << dom;
    EXPECT_TRUE(std::regex_search(dom, std::regex("class=\"tok masked\" data-token-id=\"[0-9]+\""))) << dom;
    for (const std::string view : {"curves", "fleet", "trajectories"}) {
      const std::string png = shots + "/" + view + ".png";
      std::filesystem::remove(png);
      chromium("--window-size=1280,900 --screenshot=" + png + " '" + base + "/#" + view + "'");
      ASSERT_TRUE(std::filesystem::exists(png)) << png;
      EXPECT_GT(std::filesystem::file_size(png), 5000u) << png;
    }
  }

  ASSERT_EQ(kill(pid_, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  const std::string out = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  std::smatch summary;
  ASSERT_TRUE(std::regex_search(out, summary, std::regex(R"(summary: experiment=http-run samples=[0-9]+ steps=([0-9]+) )")))
      << out;
  const int64_t sent = std::stoll(summary[1]);
  // One line per step the trainer reported: steps 1..K in order, none twice, none skipped;
  // the steps sent but not trained before the signal have none.
  auto lines = ReadMetricsLog(dir_.file("runs/http-run/metrics.jsonl"));
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_GE(lines->size(), 3u);
  for (size_t i = 0; i < lines->size(); ++i) {
    EXPECT_EQ((*lines)[i].step, (*lines)[0].step + static_cast<int64_t>(i)) << "line " << i + 1;
    EXPECT_EQ((*lines)[i].values.count("reward_mean"), 1u) << "line " << i + 1;
  }
  EXPECT_LE(lines->back().step, sent);
  EXPECT_GE(lines->back().step, sent - 2);
  if (!have_chromium) GTEST_SKIP() << "dashboard not checked: no /usr/bin/chromium (Debian package chromium)";
}

}  // namespace
}  // namespace flotilla
