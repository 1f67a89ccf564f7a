// The standalone daemons serve Prometheus /metrics on the project's one HTTP server: `flotilla
// worker` at /metrics of its wire-API server (its figures move with a chat completion), and
// `flotilla engine --metrics-listen` (the engine's families, over the model the worker wrote).
// The scheduler's and the node agent's are scraped by cluster_run_e2e_test. `flotilla bridge
// serve` runs the embedded platform (scheduler, node agent, engine, trainer bridge) and serves
// every service's figures on --metrics-listen.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "scheduler/child_process.h"
#include "testing/daemon_process.h"
#include "testing/http_client.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

using scheduler::testing::ChildProcess;

using testing::FlotillaBinary;
using testing::MetricsScrape;
using testing::WaitFor;

MetricsScrape ScrapeAt(int port) {
  testing::HttpResult r = testing::HttpCall(port, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  return testing::ParsePrometheusText(r.body);
}

TEST(DaemonMetricsTest, WorkerAndEngineDaemonsServeMetrics) {
  testing::TempDir dir;
  int worker_port = 0;
  {
    ChildProcess worker({FlotillaBinary(), "worker", "--listen", "127.0.0.1:0", "--state-dir", dir.file("worker"),
                         "--threads", "1"},
                        dir.file("worker.log"));
    ASSERT_TRUE(WaitFor(
        [&] {
          std::smatch m;
          std::string log = worker.Log();
          if (!std::regex_search(log, m, std::regex(R"(serving on http://127\.0\.0\.1:([0-9]+)/v1)"))) return false;
          worker_port = std::stoi(m[1]);
          return true;
        },
        60))
        << worker.Log();
    const MetricsScrape a = ScrapeAt(worker_port);
    testing::HttpResult chat = testing::HttpCall(
        worker_port, "POST", "/v1/chat/completions",
        R"({"model": "flotilla-default", "max_tokens": 3, "messages": [{"role": "user", "content": "2+2="}]})");
    ASSERT_EQ(chat.status, 200) << chat.body;
    const MetricsScrape b = ScrapeAt(worker_port);
    for (const char* family : {"flotilla_worker_requests_total", "flotilla_worker_sessions_opened_total",
                               "flotilla_engine_decode_tokens_total", "flotilla_engine_kv_pages"}) {
      EXPECT_EQ(b.families.count(family), 1u) << family;
    }
    EXPECT_EQ(a["flotilla_worker_requests_total{route=\"/metrics\",status=\"200\"}"], 0);
    EXPECT_EQ(b["flotilla_worker_requests_total{route=\"/metrics\",status=\"200\"}"], 1);
    EXPECT_EQ(b["flotilla_worker_requests_total{route=\"/chat/completions\",status=\"200\"}"], 1);
    EXPECT_GT(b["flotilla_engine_decode_tokens_total"], a["flotilla_engine_decode_tokens_total"]);
  }

  // The engine daemon over the model the worker wrote.
  const std::string prefix = dir.file("worker/default-model");
  ChildProcess engine({FlotillaBinary(), "engine", "--model", "default=" + prefix + ".json:" + prefix + ".safetensors",
                       "--listen", "127.0.0.1:0", "--threads", "1", "--metrics-listen", "127.0.0.1:0",
                       "--metrics-port-file", dir.file("engine.metrics")},
                      dir.file("engine.log"));
  int port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(dir.file("engine.metrics"));
        return static_cast<bool>(in >> port) && port > 0;
      },
      60))
      << engine.Log();
  const MetricsScrape e = ScrapeAt(port);
  for (const char* family : {"flotilla_engine_kv_pages", "flotilla_engine_weight_version",
                             "flotilla_engine_steps_total"}) {
    EXPECT_EQ(e.families.count(family), 1u) << family << "\n" << engine.Log();
  }
  EXPECT_EQ(testing::HttpCall(port, "GET", "/nothing").status, 404);
}

// `flotilla bridge serve` wires the embedded default where `flotilla run` does: the scheduler
// and its node agent (registered: one node, figures of both), the engine and the bridge, all
// in one registry on --metrics-listen.
TEST(DaemonMetricsTest, BridgeServeRunsTheEmbeddedPlatform) {
  if (::geteuid() != 0) GTEST_SKIP() << "the embedded node's sandbox runtime needs root";
  testing::TempDir dir;
  std::ofstream(dir.file("model.json"))
      << R"({"vocab_size":272,"n_layers":1,"d_model":32,"n_heads":2,"n_kv_heads":2,"head_dim":16,)"
         R"("n_experts":4,"top_k":2,"n_shared_experts":1,"expert_hidden":32,"max_context":64})";
  std::ofstream(dir.file("exp.yaml")) << "name: served\nstate_dir: state\npolicy: {model_config: model.json}\n"
                                         "datasets:\n  - {name: add, source: \"builtin:arith?ops=+\", weight: 1}\n"
                                         "rollout: {group_size: 2, groups_per_step: 1, max_in_flight: 4}\n";
  ChildProcess bridge({FlotillaBinary(), "bridge", "serve", dir.file("exp.yaml"), "--listen", "127.0.0.1:0",
                       "--engine-threads", "1", "--metrics-listen", "127.0.0.1:0", "--metrics-port-file",
                       dir.file("bridge.metrics")},
                      dir.file("bridge.log"));
  int port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(dir.file("bridge.metrics"));
        return bridge.Log().find("bridge: listening on 127.0.0.1:") != std::string::npos &&
               static_cast<bool>(in >> port) && port > 0;
      },
      60))
      << bridge.Log();
  const MetricsScrape m = ScrapeAt(port);
  for (const char* family : {"flotilla_scheduler_nodes", "flotilla_scheduler_placements_total",
                             "flotilla_node_sandboxes", "flotilla_node_sandbox_phase_runs_total",
                             "flotilla_engine_kv_pages"}) {
    EXPECT_EQ(m.families.count(family), 1u) << family << "\n" << bridge.Log();
  }
  EXPECT_EQ(m.Sum("flotilla_scheduler_nodes", {"state=\"alive\""}), 1) << "the node agent registered\n" << bridge.Log();
}

}  // namespace
}  // namespace flotilla
