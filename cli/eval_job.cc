#include "eval_job.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/status.h"
#include "flotilla/eval/job_models.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/report_html.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/common/progress.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/terminal_task.h"
#include "nlohmann/json.hpp"
#include "stop_signal.h"
#include "eval_trials.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool IsTaskFolder(const fs::path& p) { return fs::exists(p / "task.toml") || fs::exists(p / "task.yaml"); }

absl::StatusOr<json> ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(path.string() + ": not JSON");
  return j;
}

absl::StatusOr<std::vector<worker::TerminalTask>> LoadTasks(const std::vector<std::string>& paths) {
  std::vector<fs::path> folders;
  for (const std::string& p : paths) {
    if (IsTaskFolder(p)) {
      folders.push_back(fs::absolute(p));
      continue;
    }
    std::error_code ec;
    if (!fs::is_directory(p, ec)) return absl::NotFoundError("-p " + p + ": not a task folder nor a folder of tasks");
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      if (IsTaskFolder(e.path())) found.push_back(fs::absolute(e.path()));
    }
    if (found.empty()) return absl::NotFoundError("-p " + p + ": no task folders (task.toml or task.yaml) in it");
    std::sort(found.begin(), found.end());
    folders.insert(folders.end(), found.begin(), found.end());
  }
  std::vector<worker::TerminalTask> tasks;
  for (const fs::path& f : folders) {
    auto t = worker::LoadTerminalTask(f.string());
    if (!t.ok()) return t.status();
    tasks.push_back(std::move(*t));
  }
  return tasks;
}

}  // namespace

int RunEvalJob(EvalJobFlags f) {
  StopSignal stop;
  fs::path job_dir;
  if (!f.resume.empty()) {
    job_dir = fs::absolute(f.resume);
    auto config = ReadJson(job_dir / "config.json");
    if (!config.ok()) {
      std::cerr << "flotilla eval: --resume " << f.resume << ": " << config.status().message() << "\n";
      return 2;
    }
    try {
      f.paths = (*config)["paths"].get<std::vector<std::string>>();
      f.agents = (*config)["agents"].get<std::vector<std::string>>();
      f.attempts = (*config)["attempts"].get<int>();
      if (f.concurrency <= 1) f.concurrency = (*config)["concurrency"].get<int>();
      // The models the job was started with, unless -m names others.
      if (f.models.empty()) {
        if (config->contains("models")) {
          f.models = (*config)["models"].get<std::vector<std::string>>();
        } else {
          f.models = {config->value("model", std::string())};
          if (f.worker.endpoint_model.empty()) f.worker.endpoint_model = config->value("endpoint_model", std::string());
        }
      }
    } catch (const json::exception& e) {
      std::cerr << "flotilla eval: " << (job_dir / "config.json").string() << ": " << e.what() << "\n";
      return 2;
    }
  }
  for (const std::string& a : f.agents) {
    if (a != "oracle" && a != "nop" && a != "mini" && a != "terminal" && !IsAgentCli(a)) {
      std::cerr << "flotilla eval: -a " << a
                << ": unknown agent (built in: oracle, nop, mini, terminal; agent CLIs: pi, codex, opencode, "
                   "claude-code, qwen-code)\n";
      return 2;
    }
  }
  for (const std::string& e : f.filter_errors) {
    if (!eval::IsErrorType(e)) {
      std::cerr << "flotilla eval: --filter-error " << e
                << ": unknown error type (env_build_failed, agent_timeout, agent_error, verifier_timeout, "
                   "verifier_error, sandbox_crashed)\n";
      return 2;
    }
  }
  if (f.agents.empty() || f.paths.empty() || f.attempts < 1 || f.concurrency < 1) {
    std::cerr << "flotilla eval: -p, -a, -k >= 1 and -n >= 1 are required\n";
    return 2;
  }
  if (f.models.empty()) f.models = {f.worker.model_prefix};
  auto parsed_models = eval::ParseJobModels(f.models, f.worker.endpoint_model);
  if (!parsed_models.ok()) {
    std::cerr << "flotilla eval: " << parsed_models.status().message() << "\n";
    return 2;
  }
  const std::vector<eval::JobModel>& models = *parsed_models;
  const bool several = models.size() > 1;
  auto tasks = LoadTasks(f.paths);
  if (!tasks.ok()) {
    std::cerr << "flotilla eval: " << tasks.status().message() << "\n";
    return 2;
  }
  if (job_dir.empty()) {
    std::string name = f.job_name;
    if (name.empty()) {
      char buf[32];
      std::time_t now = std::time(nullptr);
      std::strftime(buf, sizeof(buf), "%Y-%m-%d__%H-%M-%S", std::gmtime(&now));
      name = buf;
    }
    job_dir = fs::absolute(fs::path(f.jobs_dir) / name);
    std::error_code ec;
    fs::create_directories(job_dir, ec);
    std::vector<std::string> abs_paths;
    for (const std::string& p : f.paths) abs_paths.push_back(fs::absolute(p).string());
    json config = {{"paths", abs_paths},           {"agents", f.agents},
                   {"attempts", f.attempts},       {"concurrency", f.concurrency},
                   {"env_store", f.env_store},     {"job_name", name},
                   {"models", f.models},           {"model", models[0].prefix},
                   {"endpoint_model", models[0].endpoint_model}};
    if (absl::Status s = WriteJsonFile(job_dir / "config.json", config); !s.ok()) {
      std::cerr << "flotilla eval: " << s.message() << "\n";
      return 1;
    }
  }
  // Environments first; a task whose environment does not build gets env_build_failed trials.
  JobEnvironments envs;
  {
    environments::EnvBuilder builder(CliEnvBuilderOptions(f.env_store));
    for (size_t i = 0; i < tasks->size(); ++i) {
      absl::Status s = PrepareTaskEnvironment(builder, &(*tasks)[i], nullptr);
      if (!s.ok()) {
        envs.build_errors[i] = std::string(s.message());
        continue;
      }
      for (const std::string& a : f.agents) {
        if (!IsAgentCli(a) || envs.cli_tasks.count({i, a}) != 0 || envs.cli_errors.count({i, a}) != 0) continue;
        worker::TerminalTask t = (*tasks)[i];
        absl::Status added = AddAgentLayer(builder, a, fs::absolute(f.agents_dir).string(), &t);
        if (added.ok()) {
          envs.cli_tasks.emplace(std::make_pair(i, a), std::move(t));
        } else {
          envs.cli_errors[{i, a}] = std::string(added.message());
        }
      }
    }
  }
  // Agents x models x tasks x attempts; the agents that use no model run once, with the first.
  std::vector<Trial> trials;
  for (const std::string& agent : f.agents) {
    const size_t slots = eval::AgentUsesModel(agent) ? models.size() : 1;
    for (size_t m = 0; m < slots; ++m) {
      const std::string column = several && eval::AgentUsesModel(agent) ? eval::ColumnName(agent, models[m].label)
                                                                         : agent;
      for (size_t t = 0; t < tasks->size(); ++t) {
        for (int a = 1; a <= f.attempts; ++a) {
          Trial tr{.task = t, .model = m, .agent = agent, .attempt = a,
                   .name = eval::TrialName((*tasks)[t].name, column, a), .result = std::nullopt};
          const fs::path file = job_dir / tr.name / "result.json";
          auto done = ReadJson(file);
          if (done.ok()) {
            auto r = eval::TrialResultFromJson(*done, file.string());
            if (!r.ok()) {
              std::cerr << "flotilla eval: " << r.status().message() << "\n";
              return 2;
            }
            const std::string& error = r->error_type;
            bool rerun = !error.empty() && (f.filter_errors.empty() ||
                                            std::find(f.filter_errors.begin(), f.filter_errors.end(), error) !=
                                                f.filter_errors.end());
            if (!rerun) tr.result = std::move(*r);
          }
          trials.push_back(std::move(tr));
        }
      }
    }
  }
  size_t total = 0;
  for (const Trial& tr : trials) total += tr.result.has_value() ? 0 : 1;
  ProgressBar bar({.label = "eval", .total = total});
  JobProgress progress{.bar = &bar, .total = total};
  // Each model's trials run on a platform serving it, one model after the other.
  std::vector<std::string> served(models.size());
  for (size_t m = 0; m < models.size(); ++m) {
    bool left = false;
    for (const Trial& tr : trials) {
      if (tr.model != m) continue;
      left = left || !tr.result.has_value();
      if (tr.result.has_value() && !tr.result->model.empty()) served[m] = tr.result->model;
    }
    if (!left || stop.received() != 0) continue;
    app::EmbeddedWorkerOptions wo = f.worker;
    wo.model_prefix = models[m].prefix;
    wo.endpoint_model = models[m].endpoint_model;
    auto ran = RunModelTrials(f, wo, m, *tasks, envs, job_dir.string(), &trials, &progress, stop);
    if (!ran.ok()) {
      std::cerr << "flotilla eval: " << (several ? absl::StrCat("-m ", f.models[m], ": ") : "")
                << ran.status().message() << "\n";
      return absl::IsInvalidArgument(ran.status()) ? 2 : 1;
    }
    served[m] = *ran;
    for (size_t earlier = 0; earlier < m; ++earlier) {
      if (served[earlier] == served[m]) {
        std::cerr << "flotilla eval: -m " << f.models[m] << " serves model '" << served[m] << "', as -m "
                  << f.models[earlier] << " does: a job's models must have different names\n";
        return 2;
      }
    }
  }
  if (bar.tty()) bar.Finish();
  eval::JobShape shape{.tasks = {}, .agents = f.agents, .model = served[0], .models = {}, .attempts = f.attempts};
  if (several) {
    // A model none of whose trials ran (or were found) stands under its label.
    for (size_t m = 0; m < models.size(); ++m) {
      if (served[m].empty()) served[m] = models[m].label;
    }
    shape.models = served;
    shape.model = absl::StrJoin(served, ", ");
  }
  for (const worker::TerminalTask& t : *tasks) shape.tasks.push_back(t.name);
  std::vector<eval::TrialResult> ran;
  for (const Trial& tr : trials) {
    if (tr.result.has_value()) ran.push_back(*tr.result);
  }
  json summary = eval::SummarizeJob(shape, ran);
  summary["job_dir"] = job_dir.string();
  if (absl::Status s = WriteJsonFile(job_dir / "result.json", summary); !s.ok()) {
    std::cerr << "flotilla eval: " << s.message() << "\n";
    return 1;
  }
  {
    std::ofstream html(job_dir / "report.html");
    html << eval::RenderJobReport(job_dir.filename().string(), summary, JobTranscripts(ran));
  }
  std::cout << "eval: job " << job_dir.string() << " (report.html)" << std::endl;
  std::cout << absl::StrFormat("eval: tasks=%d trials=%d pass@1=%.3f pass@k=%.3f errors=%d",
                               summary["tasks"].get<int>(), summary["trials"].get<int>(),
                               summary["pass@1"].get<double>(), summary["pass@k"].get<double>(),
                               summary["errors"].get<int>())
            << std::endl;
  if (stop.received() != 0) return stop.exit_code();
  return 0;
}

}  // namespace flotilla::cli
