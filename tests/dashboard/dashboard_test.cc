#include "flotilla/dashboard/dashboard.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "flotilla/common/http_server.h"
#include "flotilla/common/metrics_log.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/http_client.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::dashboard {
namespace {

using nlohmann::json;
using testing::HttpCall;

// A two-turn agent trajectory: a prompt, a tool call, its result, an answer; the answer's
// tokens switch policy version midway (a weight update at a token boundary).
v1::Trajectory AgentTrajectory(const std::string& id, double reward) {
  v1::Trajectory t;
  t.set_id(id);
  t.set_task("find-the-answer");
  t.set_scaffold("mini");
  t.set_reward(reward);
  t.set_status(v1::OK);
  (*t.mutable_metrics())["routing_agreement"] = 1.0;
  auto* seg = t.add_segments();
  seg->set_reason("start");
  auto add_turn = [&](v1::Turn::Role role, std::vector<int> ids, bool generated, int64_t version) {
    auto* turn = seg->add_turns();
    turn->set_role(role);
    for (int i : ids) {
      turn->mutable_tokens()->add_ids(i);
      turn->mutable_tokens()->add_loss_mask(generated ? 1 : 0);
      turn->mutable_tokens()->add_logprobs(generated ? -0.1f * static_cast<float>(i % 7) : 0.0f);
      turn->mutable_tokens()->add_policy_versions(generated ? version + (i > 80 ? 1 : 0) : -1);
    }
    return turn;
  };
  add_turn(v1::Turn::USER, {72, 105, 33}, false, 0);
  auto* call = add_turn(v1::Turn::ASSISTANT, {60, 61, 62}, true, 3);
  auto* tc = call->add_tool_calls();
  tc->set_id("call_1");
  tc->set_name("bash");
  tc->set_arguments_json(R"({"cmd":"cat answer.txt"})");
  auto* result = add_turn(v1::Turn::TOOL, {52, 50}, false, 0);
  result->set_tool_call_id("call_1");
  add_turn(v1::Turn::ASSISTANT, {52, 50, 81, 82}, true, 3);
  return t;
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = MetricsLog::Open(dir_.file("run/metrics.jsonl"));
    ASSERT_TRUE(log.ok()) << log.status();
    for (int step = 1; step <= 6; ++step) {
      ASSERT_TRUE((*log)->Append({step, 1000L * step, {{"reward_mean", 0.1 * step}, {"staleness_mean", 0.5}}}).ok());
    }
    metrics_.GetCounter("flotilla_worker_requests_total", "Requests per API", {{"api", "openai_chat"}}).Add(2);
    std::filesystem::create_directories(dir_.path() / "jobs" / "job-1");
    std::ofstream(dir_.path() / "jobs" / "job-1" / "result.json")
        << R"({"agents":{"oracle":{"tasks":2,"trials":6,"errors":0,"mean_reward":1.0,"reward_stderr":0.0,"pass@1":1.0,"pass@3":1.0}},"tasks":2,"trials":6,"errors":0,"k":3,"pass@1":1.0,"pass@k":1.0})";

    DashboardSources src;
    src.metrics = &metrics_;
    src.metrics_log_path = dir_.file("run/metrics.jsonl");
    src.recent_trajectories = [](int limit) -> absl::StatusOr<std::vector<v1::Trajectory>> {
      std::vector<v1::Trajectory> out{AgentTrajectory("traj-2", 1.0), AgentTrajectory("traj-1", 0.0)};
      if (static_cast<int>(out.size()) > limit) out.resize(limit);
      return out;
    };
    src.trajectory = [](const std::string& id) -> absl::StatusOr<v1::Trajectory> {
      if (id != "traj-1" && id != "traj-2") return absl::NotFoundError("no trajectory '" + id + "'");
      return AgentTrajectory(id, id == "traj-2" ? 1.0 : 0.0);
    };
    src.fleet = []() -> absl::StatusOr<std::vector<FleetUnit>> {
      return std::vector<FleetUnit>{
          {"unit-0",
           {{"node-a", true, 8, {{"sb-1", "running", "latency-sensitive"}, {"sb-2", "running", "best-effort"}}},
            {"node-b", true, 8, {{"sb-3", "stopped", "best-effort"}}},
            {"node-idle", true, 8, {}},
            {"node-down", false, 0, {}}}}};
    };
    src.token_text = [](int32_t id) { return std::string(1, static_cast<char>(id)); };
    src.eval_jobs_dir = (dir_.path() / "jobs").string();
    auto server = HttpServer::Start("127.0.0.1:0", DashboardHandler(std::move(src), [](const HttpRequest&, HttpResponder& out) {
      out.Send(200, "text/plain", "wire api\n");
    }));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  testing::TempDir dir_;
  MetricsRegistry metrics_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(DashboardTest, ServesThePageAndItsAssetsFromTheBinary) {
  auto page = HttpCall(server_->port(), "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<script src=\"/dashboard/app.js\">"), std::string::npos);
  std::ifstream js_file(std::string(std::getenv("FLOTILLA_SOURCE_DIR")) + "/dashboard/assets/app.js");
  std::string js_src((std::istreambuf_iterator<char>(js_file)), std::istreambuf_iterator<char>());
  auto js = HttpCall(server_->port(), "GET", "/dashboard/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, js_src);  // byte for byte what the repository holds
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/dashboard/nope.js").status, 404);
  // No asset names another host.
  EXPECT_EQ(page.body.find("http://"), std::string::npos);
  EXPECT_EQ(page.body.find("https://"), std::string::npos);
}

TEST_F(DashboardTest, ApisAnswerWithTheSourcesData) {
  auto log = json::parse(HttpCall(server_->port(), "GET", "/api/metrics_log").body);
  ASSERT_EQ(log.size(), 6u);
  EXPECT_EQ(log[5]["step"], 6);
  EXPECT_DOUBLE_EQ(log[5]["reward_mean"].get<double>(), 0.6000000000000001);

  auto list = json::parse(HttpCall(server_->port(), "GET", "/api/trajectories?limit=1").body);
  ASSERT_EQ(list["trajectories"].size(), 1u);
  EXPECT_EQ(list["trajectories"][0]["id"], "traj-2");
  EXPECT_EQ(list["trajectories"][0]["turns"], 2);
  EXPECT_EQ(list["trajectories"][0]["tool_calls"], 1);
  EXPECT_EQ(list["trajectories"][0]["tokens"], 12);
  EXPECT_EQ(list["trajectories"][0]["generated_tokens"], 7);

  auto one = json::parse(HttpCall(server_->port(), "GET", "/api/trajectories/traj-1").body);
  EXPECT_EQ(one["id"], "traj-1");
  EXPECT_EQ(one["segments"][0]["turns"][1]["tool_calls"][0]["name"], "bash");
  EXPECT_EQ(one["segments"][0]["turns"][0]["tokens"]["token_text"], json::array({"H", "i", "!"}));

  auto fleet = json::parse(HttpCall(server_->port(), "GET", "/api/fleet").body);
  EXPECT_EQ(fleet["units"][0]["nodes"][0]["sandboxes"].size(), 2u);
  EXPECT_EQ(fleet["units"][0]["nodes"][0]["slots_capacity"], 8);
  EXPECT_EQ(fleet["units"][0]["nodes"][2]["id"], "node-idle");
  EXPECT_EQ(fleet["units"][0]["nodes"][2]["sandboxes"].size(), 0u);
  EXPECT_EQ(fleet["units"][0]["nodes"][3]["alive"], false);
  auto jobs = json::parse(HttpCall(server_->port(), "GET", "/api/eval_jobs").body);
  EXPECT_EQ(jobs[0]["job"], "job-1");

  EXPECT_NE(HttpCall(server_->port(), "GET", "/metrics").body.find("flotilla_worker_requests_total{api=\"openai_chat\"} 2"),
            std::string::npos);
}

TEST_F(DashboardTest, BadRequestsGetJsonErrorsAndOtherPathsReachTheWireApis) {
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/api/trajectories/traj%2x").status, 400);
  EXPECT_EQ(json::parse(HttpCall(server_->port(), "GET", "/api/trajectories/traj%2D1").body)["id"], "traj-1");
  auto missing = HttpCall(server_->port(), "GET", "/api/trajectories/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"], "no trajectory 'nope'");
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/api/trajectories?limit=abc").status, 400);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/api/trajectories?limit=5000").status, 400);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/api/unknown").status, 404);
  auto wire = HttpCall(server_->port(), "POST", "/v1/chat/completions", "{}");
  EXPECT_EQ(wire.status, 200);
  EXPECT_EQ(wire.body, "wire api\n");
}

// Loads the page in headless Chromium as a user would, with its script, and checks what it
// drew: the reward curve with every logged step, the fleet, the trajectory's token overlays,
// and no script error. Saves a screenshot of each view next to the test binary.
TEST_F(DashboardTest, HeadlessChromiumDrawsEveryView) {
  if (::access("/usr/bin/chromium", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/chromium (Debian package chromium)";
  std::string base = "http://127.0.0.1:" + std::to_string(server_->port());
  std::string shots = std::string(std::getenv("FLOTILLA_BINARY_DIR")) + "/tests/dashboard/screenshots";
  std::filesystem::create_directories(shots);
  auto chromium = [&](const std::string& args) {
    std::string profile = dir_.file("chromium-profile");
    std::string cmd = "timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                      "--disable-background-networking --disable-component-update --disable-sync "
                      "--virtual-time-budget=4000 --user-data-dir=" + profile + " " + args + " 2>/dev/null";
    int status = 0;
    std::string out = testing::RunShell(cmd, &status);
    EXPECT_EQ(status, 0) << cmd;
    return out;
  };
  std::string dom = chromium("--dump-dom " + base + "/");
  EXPECT_NE(dom.find("data-status=\"ready\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(dom.find("data-errors"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<pre id=\"errors\"></pre>"), std::string::npos);
  EXPECT_TRUE(std::regex_search(dom, std::regex("data-metric=\"reward_mean\" data-points=\"6\"")));
  EXPECT_NE(dom.find("<path class=\"line\""), std::string::npos);
  EXPECT_NE(dom.find("data-node=\"node-a\""), std::string::npos);
  EXPECT_NE(dom.find("data-sandbox=\"sb-3\""), std::string::npos);
  // An idle node is drawn with its capacity; a node whose heartbeats stopped is marked down.
  EXPECT_TRUE(std::regex_search(dom, std::regex("class=\"node\" data-node=\"node-idle\">.*idle · 8 slots")));
  EXPECT_NE(dom.find("class=\"node down\" data-node=\"node-down\""), std::string::npos);
  EXPECT_NE(dom.find("data-trajectory=\"traj-2\""), std::string::npos);
  // Generated tokens carry their logprob overlay; the tool result's tokens are masked.
  EXPECT_TRUE(std::regex_search(dom, std::regex("class=\"tok\" data-token-id=\"60\" data-logprob=\"-0.[0-9]+\"")));
  EXPECT_TRUE(std::regex_search(dom, std::regex("class=\"tok masked\" data-token-id=\"52\"")));
  EXPECT_NE(dom.find("version-change"), std::string::npos);
  EXPECT_NE(dom.find("bash({\"cmd\":\"cat answer.txt\"})"), std::string::npos);
  EXPECT_NE(dom.find("data-job=\"job-1\""), std::string::npos);
  EXPECT_NE(dom.find("data-agent=\"oracle\""), std::string::npos);

  for (const std::string view : {"curves", "fleet", "trajectories", "eval"}) {
    std::string png = shots + "/" + view + ".png";
    std::filesystem::remove(png);
    chromium("--window-size=1280,900 --screenshot=" + png + " '" + base + "/#" + view + "'");
    ASSERT_TRUE(std::filesystem::exists(png)) << png;
    EXPECT_GT(std::filesystem::file_size(png), 5000u) << png;
  }
}

}  // namespace
}  // namespace flotilla::dashboard
