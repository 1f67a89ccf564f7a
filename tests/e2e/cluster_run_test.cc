// The quick arithmetic RL experiment (scaled down) run by `flotilla run --scheduler ADDR` against
// a real cluster on this host: a `flotilla scheduler` and two `flotilla node` agents, each node
// in its own network namespace joined to the test's by a veth pair, so the scheduler and the
// run reach every node only at its own address. Every daemon serves Prometheus /metrics, which
// the tests scrape as an operator would.
//
//   PlacesSamplesOnBothNodes   the run ends on its own; the scheduler placed on both nodes, each
//                              node's created count moved, and the sandboxes the nodes created
//                              add up to the run's; every dispatched sample is stored.
//   KilledNodeLosesNoSample    one node is SIGKILLed mid-run; the scheduler declares it dead,
//                              the run keeps training on the other, and after SIGINT every
//                              dispatched sample is in the store, the failed ones with their
//                              reason.
//
// Needs root, iproute2 and nsenter (network namespaces, and sandboxes on the nodes).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/child_process.h"
#include "scheduler/netns_hosts.h"
#include "testing/daemon_process.h"
#include "testing/http_client.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

using scheduler::testing::ChildProcess;
using scheduler::testing::NetnsHosts;

constexpr int kNodePort = 7070;
constexpr int kNodeMetricsPort = 7071;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using testing::FlotillaBinary;
using testing::MetricsScrape;
using testing::WaitFor;

std::optional<MetricsScrape> ScrapeMetrics(const std::string& host, int port) {
  try {
    testing::HttpResult r = testing::HttpCallAt(host, port, "GET", "/metrics");
    if (r.status != 200) return std::nullopt;
    return testing::ParsePrometheusText(r.body);
  } catch (const std::exception&) {
    return std::nullopt;  // not serving (yet, or any more)
  }
}

int ReadPortFile(const std::string& path) {
  int port = 0;
  std::ifstream in(path);
  return (in >> port) ? port : 0;
}

// The scaled-down quick example: the arithmetic GRPO experiment with small groups and few steps.
std::string Experiment(const std::string& state_dir, int rl_steps) {
  return absl::StrCat(R"(name: cluster-run
state_dir: )", state_dir, R"(
seed: 3
scaffold: single-turn
sandbox_policy: no-network
policy:
  model: {vocab_size: 272, n_layers: 1, d_model: 32, n_heads: 2, n_kv_heads: 2, head_dim: 16,
          n_experts: 2, top_k: 1, n_shared_experts: 1, expert_hidden: 32, max_context: 64}
  init: random
datasets:
  - {name: add, source: "builtin:arith?ops=+&max=9"}
rollout: {group_size: 4, groups_per_step: 2, max_in_flight: 8, staleness: 1, max_new_tokens: 4}
trainer: {sft_steps: 2, rl_steps: )", rl_steps, R"(, learning_rate: 0.001}
)");
}

class ClusterRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || std::system("ip netns list >/dev/null 2>&1") != 0 ||
        std::system("nsenter --version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "needs root, iproute2 and nsenter (network namespaces for the nodes)";
    }
    hosts_.emplace(2);
    ASSERT_TRUE(hosts_->ok()) << "could not set up network namespaces and veth pairs";
    scheduler_.emplace(
        std::vector<std::string>{FlotillaBinary(), "scheduler", "--listen", "0.0.0.0:0", "--state-dir", dir_.file("sched"),
                                 "--port-file", dir_.file("sched.port"), "--metrics-listen", "127.0.0.1:0",
                                 "--metrics-port-file", dir_.file("sched.metrics"), "--heartbeat-interval", "200ms",
                                 "--heartbeat-timeout", "1s", "--default-memory", "256M",
                                 "--default-cpu-millicores", "20"},
        dir_.file("sched.log"));
    ASSERT_TRUE(WaitFor([&] { return (port_ = ReadPortFile(dir_.file("sched.port"))) > 0; }, 20))
        << scheduler_->Log();
    metrics_port_ = ReadPortFile(dir_.file("sched.metrics"));
    ASSERT_GT(metrics_port_, 0) << scheduler_->Log();
    for (int k = 0; k < 2; ++k) StartNode(k, /*with_scheduler=*/true);
    ASSERT_TRUE(WaitFor(
        [&] {
          auto s = ScrapeMetrics("127.0.0.1", metrics_port_);
          return s && s->Sum("flotilla_scheduler_nodes", {"state=\"alive\""}) == 2;
        },
        30))
        << scheduler_->Log() << nodes_[0]->Log() << nodes_[1]->Log();
  }

  void TearDown() override {
    if (run_pid_ > 0) {
      kill(run_pid_, SIGKILL);
      waitpid(run_pid_, nullptr, 0);
    }
    for (int k = 0; k < 2; ++k) {
      if (nodes_[k] && !nodes_[k]->running()) {
        // A killed node left its sandboxes: a node on the same state directory removes them at
        // start (mounts, cgroups, processes of the dead runtime), then stops in order.
        nodes_[k].reset();
        StartNode(k, /*with_scheduler=*/false);
        WaitFor([&] { return ScrapeMetrics(hosts_->host(k).address, kNodeMetricsPort).has_value(); }, 30);
      }
      nodes_[k].reset();
    }
    scheduler_.reset();
  }

  void StartNode(int k, bool with_scheduler) {
    const NetnsHosts::Host& h = hosts_->host(k);
    std::vector<std::string> argv = {"/usr/bin/nsenter", absl::StrCat("--net=/run/netns/", h.ns), FlotillaBinary(), "node",
                                     "--listen", absl::StrCat(h.address, ":", kNodePort), "--state-dir",
                                     dir_.file(absl::StrCat("node", k)), "--metrics-listen",
                                     absl::StrCat(h.address, ":", kNodeMetricsPort), "--default-memory", "256M",
                                     "--default-cpu-millicores", "20", "--slots", "64"};
    if (with_scheduler) {
      for (const std::string& a : {std::string("--scheduler"), absl::StrCat(h.gateway, ":", port_),
                                   std::string("--node-id"), absl::StrCat("node-", k)}) {
        argv.push_back(a);
      }
    }
    nodes_[k].emplace(argv, dir_.file(absl::StrCat("node", k, ".log")));
  }

  std::optional<MetricsScrape> NodeMetrics(int k) { return ScrapeMetrics(hosts_->host(k).address, kNodeMetricsPort); }
  double NodeCreated(int k) {
    auto s = NodeMetrics(k);
    return s ? s->Sum("flotilla_node_sandboxes_created_total") : -1;
  }

  void StartRun(int rl_steps) {
    const std::string yaml = dir_.file("experiment.yaml");
    std::ofstream(yaml) << Experiment(dir_.file("run"), rl_steps);
    const std::string bin = FlotillaBinary(), log = dir_.file("run.log"), scheduler = absl::StrCat("127.0.0.1:", port_);
    run_pid_ = fork();
    ASSERT_GE(run_pid_, 0);
    if (run_pid_ == 0) {
      if (std::freopen(log.c_str(), "w", stdout) == nullptr) _exit(126);
      dup2(1, 2);
      execl(bin.c_str(), bin.c_str(), "run", "--fresh", "--scheduler", scheduler.c_str(), yaml.c_str(), nullptr);
      _exit(127);
    }
  }
  // The run's exit status (-1 if it did not end within `seconds`).
  int WaitRun(double seconds) {
    int status = 0;
    if (!WaitFor([&] { return waitpid(run_pid_, &status, WNOHANG) == run_pid_; }, seconds)) return -1;
    run_pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string RunLog() { return ReadFile(dir_.file("run.log")); }
  // A figure of the run's summary ("summary: ... NAME=VALUE ..." or the last line "run: ...").
  long SummaryFigure(const std::string& name) {
    std::smatch m;
    std::string log = RunLog();
    if (!std::regex_search(log, m, std::regex("(summary|run): .*\\b" + name + "=([0-9]+)"))) return -1;
    return std::stol(m[2]);
  }
  // Every stored trajectory of the run, through `flotilla trajectories export`.
  std::vector<nlohmann::json> StoredTrajectories() {
    const std::string out = dir_.file("export.jsonl");
    const std::string cmd = absl::StrCat(FlotillaBinary(), " trajectories export --db ", dir_.file("run/trajectories.db"),
                                         " --experiment cluster-run > ", out);
    std::vector<nlohmann::json> rows;
    if (std::system(cmd.c_str()) != 0) return rows;
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
    }
    return rows;
  }

  testing::TempDir dir_;
  std::optional<NetnsHosts> hosts_;
  std::optional<ChildProcess> scheduler_;
  std::optional<ChildProcess> nodes_[2];
  int port_ = 0, metrics_port_ = 0;
  pid_t run_pid_ = -1;
};

TEST_F(ClusterRunTest, PlacesSamplesOnBothNodes) {
  const double before0 = NodeCreated(0), before1 = NodeCreated(1);
  ASSERT_EQ(before0, 0) << nodes_[0]->Log();
  ASSERT_EQ(before1, 0) << nodes_[1]->Log();
  StartRun(/*rl_steps=*/3);
  ASSERT_EQ(WaitRun(120), 0) << RunLog();

  // Both nodes created sandboxes for the run's samples, as many as the run counts.
  const double created0 = NodeCreated(0), created1 = NodeCreated(1);
  EXPECT_GT(created0, 0);
  EXPECT_GT(created1, 0);
  const long sandboxes = SummaryFigure("sandboxes");
  EXPECT_EQ(created0 + created1, static_cast<double>(sandboxes)) << RunLog();
  auto node0 = NodeMetrics(0);
  ASSERT_TRUE(node0.has_value());
  EXPECT_EQ(node0->Sum("flotilla_node_sandboxes_destroyed_total"), created0);
  EXPECT_EQ(node0->Sum("flotilla_node_sandbox_create_seconds_count"), created0);
  // The scheduler's view: every one of them placed by it, on two live nodes.
  auto sched = ScrapeMetrics("127.0.0.1", metrics_port_);
  ASSERT_TRUE(sched.has_value());
  EXPECT_EQ(sched->Sum("flotilla_scheduler_placements_total"), created0 + created1);
  EXPECT_EQ(sched->Sum("flotilla_scheduler_nodes", {"state=\"alive\""}), 2);

  // Every dispatched sample is stored; none failed.
  const long dispatched = SummaryFigure("dispatched_samples");
  EXPECT_GE(dispatched, 24) << RunLog();  // three steps of two groups of four, at least
  EXPECT_EQ(SummaryFigure("samples"), dispatched) << RunLog();
  EXPECT_EQ(SummaryFigure("failed_samples"), 0) << RunLog();
  EXPECT_EQ(static_cast<long>(StoredTrajectories().size()), dispatched);
  EXPECT_EQ(sandboxes, dispatched);
}

TEST_F(ClusterRunTest, KilledNodeLosesNoSample) {
  StartRun(/*rl_steps=*/100000);
  // Samples run on both nodes; then node 1 dies without a word.
  ASSERT_TRUE(WaitFor([&] { return NodeCreated(0) >= 4 && NodeCreated(1) >= 4; }, 60))
      << RunLog() << scheduler_->Log();
  nodes_[1]->Kill();
  const double at_kill = NodeCreated(0);
  // The scheduler declares it dead (heartbeat timeout 1 s) and the run goes on on node 0.
  auto sched_dead = [&] {
    auto s = ScrapeMetrics("127.0.0.1", metrics_port_);
    return s && s->Sum("flotilla_scheduler_nodes", {"state=\"dead\""}) == 1;
  };
  EXPECT_TRUE(WaitFor(sched_dead, 15)) << scheduler_->Log();
  ASSERT_TRUE(WaitFor([&] { return NodeCreated(0) >= at_kill + 16; }, 60)) << RunLog();
  ASSERT_EQ(waitpid(run_pid_, nullptr, WNOHANG), 0) << "the run ended early:\n" << RunLog();

  // An orderly stop: samples in flight finish and are stored.
  kill(run_pid_, SIGINT);
  ASSERT_EQ(WaitRun(60), 130) << RunLog();
  const long dispatched = SummaryFigure("dispatched_samples");
  ASSERT_GT(dispatched, 0) << RunLog();
  EXPECT_EQ(SummaryFigure("samples"), dispatched) << RunLog();
  std::vector<nlohmann::json> stored = StoredTrajectories();
  EXPECT_EQ(static_cast<long>(stored.size()), dispatched);
  long failed = 0;
  for (const nlohmann::json& t : stored) {
    if (t.value("status", "OK") == "OK" || t.value("status", "") == "TIMED_OUT") continue;
    ++failed;
    EXPECT_FALSE(t.value("detail", "").empty()) << t.dump();
    std::cerr << "failed sample " << t.value("id", "") << ": " << t.value("detail", "") << "\n";
  }
  EXPECT_EQ(SummaryFigure("failed_samples"), failed) << RunLog();
  // Nothing stays placed on the dead node: its sandboxes are lost or deleted, none running.
  auto sched = ScrapeMetrics("127.0.0.1", metrics_port_);
  ASSERT_TRUE(sched.has_value());
  EXPECT_EQ(sched->Sum("flotilla_scheduler_sandboxes", {"state=\"running\""}), 0);
}

}  // namespace
}  // namespace flotilla
