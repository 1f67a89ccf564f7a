// An eval job's results: token counts from a trajectory, result.json read back (errors naming
// the file and field), the job's summary, report.html, and the trajectories of a job folder.
#include <filesystem>
#include <fstream>

#include "flotilla/eval/job_folder.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/report_html.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/worker/remote_chat.h"
#include "flotilla/worker/trajectory_store.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::eval {
namespace {

using nlohmann::json;

v1::Turn MakeTurn(v1::Turn::Role role, const std::string& text, std::vector<uint32_t> mask) {
  v1::Turn t;
  t.set_role(role);
  t.set_text(text);
  for (size_t i = 0; i < mask.size(); ++i) {
    t.mutable_tokens()->add_ids(static_cast<int32_t>(100 + i));
    t.mutable_tokens()->add_loss_mask(mask[i]);
  }
  return t;
}

// system 5 ids, user 3, reply (2 head, 4 generated, 1 tail), tool 6, reply (2 head, 3 generated, 1 tail).
v1::Trajectory TwoReplies(const std::string& id) {
  v1::Trajectory t;
  t.set_id(id);
  t.set_task("hello");
  v1::Segment* s = t.add_segments();
  s->set_reason("start");
  *s->add_turns() = MakeTurn(v1::Turn::SYSTEM, "be brief", {0, 0, 0, 0, 0});
  *s->add_turns() = MakeTurn(v1::Turn::USER, "write <b>hi</b>", {0, 0, 0});
  *s->add_turns() = MakeTurn(v1::Turn::ASSISTANT, "ls", {0, 0, 1, 1, 1, 1, 0});
  *s->add_turns() = MakeTurn(v1::Turn::TOOL, "a.txt", {0, 0, 0, 0, 0, 0});
  v1::Turn last = MakeTurn(v1::Turn::ASSISTANT, "done", {0, 0, 1, 1, 1, 0});
  v1::ToolCall* c = last.add_tool_calls();
  c->set_name("submit");
  c->set_arguments_json("{}");
  *s->add_turns() = last;
  return t;
}

TEST(TrialTokensTest, CountsRepliesGeneratedTokensAndEachReplysContext) {
  TrialTokens n = CountTrialTokens(TwoReplies("t1"));
  EXPECT_EQ(n.turns, 2);
  EXPECT_EQ(n.completion_tokens, 7);
  // First reply: 5 + 3 before it + 2 head; second: 5 + 3 + 7 + 6 before it + 2 head.
  EXPECT_EQ(n.prompt_tokens, 10 + 23);
  EXPECT_TRUE(n.exact);
}

TEST(TrialTokensTest, TextOnlyTrajectoryTakesTheEndpointsUsage) {
  v1::Trajectory t;
  v1::Segment* s = t.add_segments();
  *s->add_turns() = MakeTurn(v1::Turn::USER, "hi", {});
  *s->add_turns() = MakeTurn(v1::Turn::ASSISTANT, "hello", {});
  (*t.mutable_metrics())[worker::kUsagePromptTokens] = 17;
  (*t.mutable_metrics())[worker::kUsageCompletionTokens] = 4;
  TrialTokens n = CountTrialTokens(t);
  EXPECT_EQ(n.turns, 1);
  EXPECT_EQ(n.prompt_tokens, 17);
  EXPECT_EQ(n.completion_tokens, 4);
  EXPECT_FALSE(n.exact);
}

TrialResult Trial(const std::string& task, int attempt, double reward, const std::string& error = "") {
  TrialResult r;
  r.task = task;
  r.agent = "mini";
  r.model = "m";
  r.attempt = attempt;
  r.reward = reward;
  r.status = error.empty() ? "OK" : "FAILED";
  r.error_type = error;
  r.seconds = 1.5;
  r.steps = 2;
  r.trajectory_id = "sess-" + task + std::to_string(attempt);
  r.tokens = {.prompt_tokens = 100, .completion_tokens = 10, .turns = 2, .exact = true};
  return r;
}

TEST(TrialResultTest, RoundTripsThroughJson) {
  TrialResult r = Trial("a", 2, 1.0);
  r.trajectory_store = "/tmp/x.db";
  auto back = TrialResultFromJson(TrialResultToJson(r), "a__mini__2/result.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(TrialResultToJson(*back), TrialResultToJson(r));
  EXPECT_EQ(TrialName("a", "mini", 2), "a__mini__2");
}

TEST(TrialResultTest, BadFieldsAreErrorsNamingFileAndField) {
  struct Case {
    json j;
    std::string message;
  };
  json good = TrialResultToJson(Trial("a", 1, 0));
  json bad_reward = good, no_task = good, bad_error = good, bad_attempt = good, bad_tokens = good;
  bad_reward["reward"] = "x";
  no_task.erase("task");
  bad_error["error_type"] = "oops";
  bad_attempt["attempt"] = 0;
  bad_tokens["prompt_tokens"] = 1.5;
  for (const Case& c : std::vector<Case>{
           {bad_reward, "r.json: reward: expected a number, got \"x\""},
           {no_task, "r.json: task: missing"},
           {bad_error, "r.json: error_type: unknown 'oops'"},
           {bad_attempt, "r.json: attempt: must be >= 1"},
           {bad_tokens, "r.json: prompt_tokens: expected an integer, got 1.5"},
           {json::array(), "r.json: expected a JSON object"}}) {
    auto r = TrialResultFromJson(c.j, "r.json");
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(JobSummaryTest, PassAtKPerTaskAndTokens) {
  JobShape shape{.tasks = {"a", "b"}, .agents = {"mini"}, .model = "m", .models = {}, .attempts = 2};
  std::vector<TrialResult> trials = {Trial("a", 1, 1.0), Trial("a", 2, 0.0), Trial("b", 1, 0.0),
                                     Trial("b", 2, 0.0, "agent_timeout")};
  json s = SummarizeJob(shape, trials);
  EXPECT_EQ(s["model"], "m");
  EXPECT_EQ(s["k"], 2);
  EXPECT_EQ(s["tasks"], 2);
  EXPECT_EQ(s["trials"], 4);
  EXPECT_EQ(s["errors"], 1);
  EXPECT_DOUBLE_EQ(s["pass@1"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["pass@k"].get<double>(), 0.5);
  EXPECT_EQ(s["prompt_tokens"], 400);
  EXPECT_EQ(s["completion_tokens"], 40);
  const json& a = s["agents"]["mini"];
  EXPECT_EQ(a["tasks"], 2);
  EXPECT_DOUBLE_EQ(a["pass@2"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(a["mean_reward"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a["turns_mean"].get<double>(), 2.0);
  EXPECT_EQ(s["per_task"]["a"]["mini"], (json{{"trials", 2}, {"passed", 1}, {"pass_rate", 0.5},
                                              {"mean_reward", 0.5}, {"errors", 0}}));
  EXPECT_EQ(s["per_task"]["b"]["mini"]["errors"], 1);
  ASSERT_EQ(s["trial_results"].size(), 4u);
  EXPECT_EQ(s["trial_results"][3]["error_type"], "agent_timeout");
}

TEST(ReportHtmlTest, SelfContainedWithEscapedTextAndEveryTrial) {
  JobShape shape{.tasks = {"a<b>"}, .agents = {"mini"}, .model = "m", .models = {}, .attempts = 2};
  std::vector<TrialResult> trials = {Trial("a<b>", 1, 1.0), Trial("a<b>", 2, 0.0, "verifier_error")};
  trials[1].tokens.exact = false;
  v1::Trajectory t = TwoReplies(trials[0].trajectory_id);
  std::string html = RenderJobReport("job-1", SummarizeJob(shape, trials), {{t.id(), TranscriptText(t)}});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* banned : {"http://", "https://", "<script", "src=", "<link", "@import"}) {
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  }
  EXPECT_EQ(html.find("a<b>"), std::string::npos);
  EXPECT_NE(html.find("<td>a&lt;b&gt;</td><td class=\"num\">1/2 (0.50) <span class=\"error\">1 err</span></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-trial=\"a&lt;b&gt;__mini__1\""), std::string::npos);
  EXPECT_NE(html.find("<td class=\"error\">verifier_error</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">100*</td>"), std::string::npos);
  EXPECT_NE(html.find("[user] write &lt;b&gt;hi&lt;/b&gt;\n"), std::string::npos);
  EXPECT_NE(html.find("  -&gt; submit({})\n"), std::string::npos);
  EXPECT_NE(html.find("tasks=1 trials=2 pass@1=0.500 pass@k=1.000 (k=2) errors=1"), std::string::npos) << html;
}

void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(JobFolderTest, ExportsEachTrialsTrajectoryFromItsStore) {
  testing::TempDir dir;
  const std::string db = dir.file("t.db");
  {
    auto store = worker::TrajectoryStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(TwoReplies("sess-a1")).ok());
  }
  const std::filesystem::path job = dir.file("job");
  WriteFile(job / "config.json", "{}");
  TrialResult ran = Trial("a", 1, 1.0);
  ran.trajectory_store = db;
  TrialResult unbuilt = Trial("b", 1, 0.0, "env_build_failed");
  unbuilt.trajectory_id = "";
  WriteFile(job / "a__mini__1" / "result.json", TrialResultToJson(ran).dump());
  WriteFile(job / "b__mini__1" / "result.json", TrialResultToJson(unbuilt).dump());
  std::vector<std::string> seen;
  auto n = ForEachJobTrajectory(job.string(), [&](const TrialResult& t, const v1::Trajectory& traj) {
    seen.push_back(t.task + ":" + traj.id());
    return absl::OkStatus();
  });
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(seen, std::vector<std::string>{"a:sess-a1"});

  ran.trajectory_id = "sess-gone";
  WriteFile(job / "a__mini__1" / "result.json", TrialResultToJson(ran).dump());
  n = ForEachJobTrajectory(job.string(), [](const TrialResult&, const v1::Trajectory&) { return absl::OkStatus(); });
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(n.status().message()).rfind((job / "a__mini__1" / "result.json").string() +
                                                        ": trajectory_id: 'sess-gone' is not in " + db,
                                                    0),
            0u)
      << n.status();

  auto none = LoadTrialResults(dir.file("nothing"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), dir.file("nothing") + ": not an eval job folder (no config.json)");
}

}  // namespace
}  // namespace flotilla::eval
