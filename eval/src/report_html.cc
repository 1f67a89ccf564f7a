#include "flotilla/eval/report_html.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/eval/job_summary.h"

namespace flotilla::eval {
namespace {

using nlohmann::json;

constexpr const char* kStyle = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.pass td.reward { background: #dff3df; } tr.fail td.reward { background: #f8dddd; }
td.error { color: #a00; } pre { white-space: pre-wrap; max-width: 110ch; font-size: 12px; }
.muted { color: #777; }
)CSS";

std::string Num(const json& j, const char* key, const char* fmt = "%.3f") {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "";
  return absl::StrFormat(fmt, it->get<double>());
}

std::string Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "";
  return absl::StrCat(it->get<int64_t>());
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? HtmlEscape(it->get<std::string>()) : "";
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string TranscriptText(const v1::Trajectory& t) {
  static const char* kRoles[] = {"?", "system", "user", "assistant", "tool"};
  std::string out;
  for (const v1::Segment& seg : t.segments()) {
    absl::StrAppend(&out, "=== segment (", seg.reason(), ")\n");
    for (const v1::Turn& turn : seg.turns()) {
      int role = static_cast<int>(turn.role());
      absl::StrAppend(&out, "[", role >= 0 && role <= 4 ? kRoles[role] : "?", "] ", turn.text(), "\n");
      for (const v1::ToolCall& c : turn.tool_calls()) {
        absl::StrAppend(&out, "  -> ", c.name(), "(", c.arguments_json(), ")\n");
      }
    }
  }
  return out;
}

std::string RenderJobReport(const std::string& job_name, const json& s,
                            const std::map<std::string, std::string>& transcripts) {
  const int k = s.value("k", 1);
  std::string model = Str(s, "model");
  if (s.value("models", json::array()).size() > 1) {
    model.clear();
    for (const json& m : s["models"]) {
      absl::StrAppend(&model, model.empty() ? "" : ", ", m.is_string() ? HtmlEscape(m.get<std::string>()) : "");
    }
  }
  const std::string pass_k = absl::StrCat("pass@", k);
  std::string h;
  absl::StrAppend(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>eval ",
                  HtmlEscape(job_name), "</title>\n<style>", kStyle, "</style></head><body>\n");
  absl::StrAppend(&h, "<h1>eval job ", HtmlEscape(job_name), "</h1>\n<p id=\"summary\">model <b>",
                  model, "</b> &middot; tasks=", Int(s, "tasks"), " trials=", Int(s, "trials"),
                  " pass@1=", Num(s, "pass@1"), " pass@k=", Num(s, "pass@k"), " (k=", k, ") errors=",
                  Int(s, "errors"), " &middot; tokens: prompt ", Int(s, "prompt_tokens"), ", completion ",
                  Int(s, "completion_tokens"), "</p>\n");

  absl::StrAppend(&h, "<h2>Agents</h2>\n<table id=\"agents\"><tr><th>agent</th><th>tasks</th><th>trials</th>"
                      "<th>pass@1</th><th>", pass_k, "</th><th>mean &plusmn; se</th><th>errors</th>"
                      "<th>prompt tokens</th><th>completion tokens</th><th>turns (mean)</th></tr>\n");
  const json agents = s.value("agents", json::object());
  for (const auto& [agent, a] : agents.items()) {
    absl::StrAppend(&h, "<tr><td>", HtmlEscape(agent), "</td><td class=\"num\">", Int(a, "tasks"),
                    "</td><td class=\"num\">", Int(a, "trials"), "</td><td class=\"num\">", Num(a, "pass@1"),
                    "</td><td class=\"num\">", Num(a, pass_k.c_str()), "</td><td class=\"num\">",
                    Num(a, "mean_reward"), " &plusmn; ", Num(a, "reward_stderr"), "</td><td class=\"num\">",
                    Int(a, "errors"), "</td><td class=\"num\">", Int(a, "prompt_tokens"), "</td><td class=\"num\">",
                    Int(a, "completion_tokens"), "</td><td class=\"num\">", Num(a, "turns_mean", "%.1f"),
                    "</td></tr>\n");
  }
  absl::StrAppend(&h, "</table>\n");

  absl::StrAppend(&h, "<h2>Pass rate per task</h2>\n<table id=\"per-task\"><tr><th>task</th>");
  for (const auto& [agent, a] : agents.items()) absl::StrAppend(&h, "<th>", HtmlEscape(agent), "</th>");
  absl::StrAppend(&h, "</tr>\n");
  const json per_task = s.value("per_task", json::object());
  for (const auto& [task, by_agent] : per_task.items()) {
    absl::StrAppend(&h, "<tr><td>", HtmlEscape(task), "</td>");
    for (const auto& [agent, a] : agents.items()) {
      auto it = by_agent.find(agent);
      if (it == by_agent.end()) {
        absl::StrAppend(&h, "<td class=\"muted\">&ndash;</td>");
        continue;
      }
      absl::StrAppend(&h, "<td class=\"num\">", Int(*it, "passed"), "/", Int(*it, "trials"), " (",
                      Num(*it, "pass_rate", "%.2f"), ")", it->value("errors", 0) > 0
                          ? absl::StrCat(" <span class=\"error\">", Int(*it, "errors"), " err</span>")
                          : "",
                      "</td>");
    }
    absl::StrAppend(&h, "</tr>\n");
  }
  absl::StrAppend(&h, "</table>\n");

  absl::StrAppend(&h, "<h2>Trials</h2>\n<table id=\"trials\"><tr><th>trial</th><th>reward</th><th>status</th>"
                      "<th>error</th><th>seconds</th><th>prompt tokens</th><th>completion tokens</th>"
                      "<th>turns</th><th>detail</th></tr>\n");
  const bool several_models = s.value("models", json::array()).size() > 1;
  for (const json& t : s.value("trial_results", json::array())) {
    // Trials of several models are told apart by theirs (the model agents' columns).
    const std::string agent = t.value("agent", "");
    const std::string name =
        absl::StrCat(t.value("task", ""), "__",
                     several_models && AgentUsesModel(agent) ? ColumnName(agent, t.value("model", "")) : agent, "__",
                     t.value("attempt", 0));
    const bool exact = t.value("tokens_exact", true);
    absl::StrAppend(&h, "<tr class=\"", t.value("reward", 0.0) >= 1.0 ? "pass" : "fail", "\" data-trial=\"",
                    HtmlEscape(name), "\"><td>", HtmlEscape(name), "</td><td class=\"num reward\">",
                    Num(t, "reward", "%g"), "</td><td>", Str(t, "status"), "</td><td class=\"error\">",
                    Str(t, "error_type"), "</td><td class=\"num\">", Num(t, "seconds", "%.1f"),
                    "</td><td class=\"num\">", Int(t, "prompt_tokens"), exact ? "" : "*",
                    "</td><td class=\"num\">", Int(t, "completion_tokens"), exact ? "" : "*",
                    "</td><td class=\"num\">", Int(t, "turns"), "</td><td>", Str(t, "detail"));
    auto tr = transcripts.find(t.value("trajectory_id", ""));
    if (tr != transcripts.end()) {
      absl::StrAppend(&h, "<details><summary>transcript</summary><pre>", HtmlEscape(tr->second),
                      "</pre></details>");
    }
    absl::StrAppend(&h, "</td></tr>\n");
  }
  absl::StrAppend(&h, "</table>\n<p class=\"muted\">* the endpoint's own usage figures (an external endpoint: "
                      "its trajectory is recorded as text, not tokens)</p>\n</body></html>\n");
  return h;
}

}  // namespace flotilla::eval
