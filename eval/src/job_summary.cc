#include "flotilla/eval/job_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/worker/pass_at_k.h"

namespace flotilla::eval {

using nlohmann::json;

bool AgentUsesModel(const std::string& agent) { return agent != "oracle" && agent != "nop"; }

std::string ColumnName(const std::string& agent, const std::string& model) {
  return model.empty() ? agent : absl::StrCat(agent, "@", model);
}

json SummarizeJob(const JobShape& shape, const std::vector<TrialResult>& trials) {
  const int k = std::max(1, shape.attempts);
  json agents = json::object();
  json per_task = json::object();
  double p1_sum = 0, pk_sum = 0;
  int pairs = 0, errors = 0, ran = 0;
  int64_t prompt = 0, completion = 0;
  struct Column {
    std::string agent;
    std::string model;  // "": any model
  };
  std::vector<Column> columns;
  for (const std::string& agent : shape.agents) {
    if (shape.models.size() > 1 && AgentUsesModel(agent)) {
      for (const std::string& m : shape.models) columns.push_back({agent, m});
    } else {
      columns.push_back({agent, ""});
    }
  }
  for (const Column& col : columns) {
    const std::string& agent = col.agent;
    const std::string key = ColumnName(agent, col.model);
    std::vector<double> rewards, p1s, pks;
    int agent_errors = 0, turns = 0;
    int64_t agent_prompt = 0, agent_completion = 0;
    for (const std::string& task : shape.tasks) {
      int n = 0, c = 0, task_errors = 0;
      double reward_sum = 0;
      for (const TrialResult& t : trials) {
        if (t.task != task || t.agent != agent || (!col.model.empty() && t.model != col.model)) continue;
        ++n;
        rewards.push_back(t.reward);
        reward_sum += t.reward;
        c += t.reward >= 1.0 ? 1 : 0;
        task_errors += t.error_type.empty() ? 0 : 1;
        turns += t.tokens.turns;
        agent_prompt += t.tokens.prompt_tokens;
        agent_completion += t.tokens.completion_tokens;
      }
      if (n == 0) continue;
      agent_errors += task_errors;
      p1s.push_back(worker::PassAtK(n, c, 1));
      pks.push_back(worker::PassAtK(n, c, std::min(k, n)));
      per_task[task][key] = {{"trials", n},
                               {"passed", c},
                               {"pass_rate", static_cast<double>(c) / n},
                               {"mean_reward", reward_sum / n},
                               {"errors", task_errors}};
    }
    worker::MeanAndError m = worker::MeanWithStandardError(rewards);
    worker::MeanAndError p1 = worker::MeanWithStandardError(p1s);
    worker::MeanAndError pk = worker::MeanWithStandardError(pks);
    agents[key] = {{"agent", agent},
                   {"model", col.model.empty() && AgentUsesModel(agent) ? shape.model : col.model},
                   {"tasks", p1s.size()},
                   {"trials", rewards.size()},
                   {"errors", agent_errors},
                   {"mean_reward", m.mean},
                   {"reward_stderr", m.standard_error},
                   {"pass@1", p1.mean},
                   {absl::StrCat("pass@", k), pk.mean},
                   {"prompt_tokens", agent_prompt},
                   {"completion_tokens", agent_completion},
                   {"turns_mean", rewards.empty() ? 0.0 : static_cast<double>(turns) / rewards.size()}};
    for (double v : p1s) p1_sum += v;
    for (double v : pks) pk_sum += v;
    pairs += static_cast<int>(p1s.size());
    errors += agent_errors;
    ran += static_cast<int>(rewards.size());
    prompt += agent_prompt;
    completion += agent_completion;
  }
  json list = json::array();
  for (const TrialResult& t : trials) list.push_back(TrialResultToJson(t));
  json models = shape.models.empty() && !shape.model.empty() ? json::array({shape.model}) : json(shape.models);
  return json{{"model", shape.model},
              {"models", models},
              {"k", k},
              {"tasks", shape.tasks.size()},
              {"trials", ran},
              {"errors", errors},
              {"pass@1", pairs > 0 ? p1_sum / pairs : 0.0},
              {"pass@k", pairs > 0 ? pk_sum / pairs : 0.0},
              {"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"agents", agents},
              {"per_task", per_task},
              {"trial_results", list}};
}

}  // namespace flotilla::eval
