// The models of an eval job (-m, repeatable): their labels, and the job's summary and report
// with each model agent per model side by side while oracle and nop stand once.
#include "flotilla/eval/job_models.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/report_html.h"
#include "gtest/gtest.h"

namespace flotilla::eval {
namespace {

using nlohmann::json;

TEST(JobModelsTest, LabelsFoldersEndpointsAndTheirNamedModels) {
  auto m = ParseJobModels({"", "/models/Qwen3-0.6B/", "http://127.0.0.1:8000/v1", "anthropic+https://h.test/v1#big one",
                           "/other/Qwen3-0.6B"},
                          "");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 5u);
  std::vector<std::string> labels, prefixes, names;
  for (const JobModel& j : *m) {
    labels.push_back(j.label);
    prefixes.push_back(j.prefix);
    names.push_back(j.endpoint_model);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"default", "Qwen3-0.6B", "127.0.0.1-8000", "h.test-big-one",
                                              "Qwen3-0.6B-2"}));
  EXPECT_EQ(prefixes, (std::vector<std::string>{"", "/models/Qwen3-0.6B/", "http://127.0.0.1:8000/v1",
                                                "anthropic+https://h.test/v1", "/other/Qwen3-0.6B"}));
  EXPECT_EQ(names, (std::vector<std::string>{"", "", "", "big one", ""}));

  // --endpoint-model applies to the URLs without "#NAME".
  auto e = ParseJobModels({"http://h/v1", "http://h/v1#b"}, "a");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)[0].endpoint_model, "a");
  EXPECT_EQ((*e)[0].label, "h-a");
  EXPECT_EQ((*e)[1].endpoint_model, "b");
  EXPECT_EQ((*e)[1].label, "h-b");

  EXPECT_EQ(ParseJobModels({"m", "m"}, "").status().message(), "-m m: given twice");
  EXPECT_EQ(ParseJobModels({"http://h/v1#"}, "").status().message(), "-m http://h/v1#: empty model name after '#'");
}

TrialResult Ran(const std::string& task, const std::string& agent, const std::string& model, double reward) {
  TrialResult r;
  r.task = task;
  r.agent = agent;
  r.model = model;
  r.attempt = 1;
  r.reward = reward;
  r.status = "OK";
  r.tokens = {.prompt_tokens = 10, .completion_tokens = 1, .turns = 1, .exact = true};
  return r;
}

TEST(JobModelsTest, SummaryAndReportPutEachModelSideBySide) {
  JobShape shape{.tasks = {"a", "b"}, .agents = {"oracle", "mini"}, .model = "x, y", .models = {"x", "y"},
                 .attempts = 1};
  std::vector<TrialResult> trials = {Ran("a", "oracle", "", 1), Ran("b", "oracle", "", 1),
                                     Ran("a", "mini", "x", 1),  Ran("b", "mini", "x", 0),
                                     Ran("a", "mini", "y", 0),  Ran("b", "mini", "y", 0)};
  json s = SummarizeJob(shape, trials);
  EXPECT_EQ(s["models"], json::array({"x", "y"}));
  EXPECT_EQ(s["trials"], 6);
  std::vector<std::string> columns;
  for (const auto& [k, v] : s["agents"].items()) columns.push_back(k);
  EXPECT_EQ(columns, (std::vector<std::string>{"mini@x", "mini@y", "oracle"}));
  EXPECT_EQ(s["agents"]["mini@x"]["agent"], "mini");
  EXPECT_EQ(s["agents"]["mini@x"]["model"], "x");
  EXPECT_EQ(s["agents"]["mini@x"]["trials"], 2);
  EXPECT_DOUBLE_EQ(s["agents"]["mini@x"]["pass@1"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["agents"]["mini@y"]["pass@1"].get<double>(), 0.0);
  EXPECT_EQ(s["agents"]["oracle"]["model"], "");
  EXPECT_EQ(s["agents"]["oracle"]["trials"], 2);
  EXPECT_EQ(s["per_task"]["a"]["mini@x"]["passed"], 1);
  EXPECT_EQ(s["per_task"]["a"]["mini@y"]["passed"], 0);
  // pass@1 over the 3 columns x 2 tasks: oracle 2, mini@x 1, mini@y 0 of 6.
  EXPECT_DOUBLE_EQ(s["pass@1"].get<double>(), 0.5);

  const std::string html = RenderJobReport("j", s, {});
  EXPECT_NE(html.find("model <b>x, y</b>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><th>task</th><th>mini@x</th><th>mini@y</th><th>oracle</th></tr>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("data-trial=\"b__mini@y__1\""), std::string::npos);
  EXPECT_NE(html.find("data-trial=\"b__oracle__1\""), std::string::npos);

  // One model: columns are the agents' names, as before.
  JobShape one{.tasks = {"a"}, .agents = {"mini"}, .model = "x", .models = {}, .attempts = 1};
  json s1 = SummarizeJob(one, {Ran("a", "mini", "x", 1)});
  EXPECT_EQ(s1["models"], json::array({"x"}));
  EXPECT_EQ(s1["agents"]["mini"]["model"], "x");
}

}  // namespace
}  // namespace flotilla::eval
