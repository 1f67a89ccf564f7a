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
#include "flotilla/app/embedded_platform.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/report_html.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/common/progress.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/terminal_task.h"
#include "nlohmann/json.hpp"
#include "stop_signal.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Trial {
  size_t task = 0;  // index into the tasks
  std::string agent;
  int attempt = 0;
  std::string name;  // "<task>__<agent>__<attempt>"
  std::optional<eval::TrialResult> result;  // empty until it ran (or was found done)
};

bool IsTaskFolder(const fs::path& p) { return fs::exists(p / "task.toml") || fs::exists(p / "task.yaml"); }

absl::Status WriteJson(const fs::path& path, const json& j) {
  fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) return absl::InternalError(path.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(path.string() + ": " + ec.message());
  return absl::OkStatus();
}

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

// The error type of a finished trial ("" when it ran to a reward).
std::string ErrorType(const absl::StatusOr<worker::ScaffoldResult>& r) {
  if (!r.ok()) return "agent_error";
  if (r->status == v1::CRASHED) return "sandbox_crashed";
  if (r->status == v1::TIMED_OUT) return "agent_timeout";
  if (r->status == v1::FAILED) {
    return r->detail.find("reward") != std::string::npos ? "verifier_error" : "agent_error";
  }
  if (r->detail.find("tests exited") != std::string::npos && r->detail.find("(timed out)") != std::string::npos) {
    return "verifier_timeout";
  }
  return "";
}

}  // namespace

absl::StatusOr<worker::ScaffoldResult> RunScaffoldWhenThereIsRoom(worker::ChatService& service,
                                                                  worker::SandboxClient& sandboxes,
                                                                  const worker::TerminalTask& task,
                                                                  const worker::ScaffoldOptions& options,
                                                                  const StopSignal& stop) {
  auto res = worker::RunScaffold(service, sandboxes, task, options);
  // A sandbox is placed only where there is room (the node did not admit it, or every scale
  // unit is full until a finished trial's sandbox is gone): a trial refused for now waits.
  while (!res.ok() && absl::IsResourceExhausted(res.status()) && stop.received() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    res = worker::RunScaffold(service, sandboxes, task, options);
  }
  return res;
}

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
      // The model the job was started with, unless -m names another.
      if (f.worker.model_prefix.empty()) {
        f.worker.model_prefix = config->value("model", std::string());
        if (f.worker.endpoint_model.empty()) f.worker.endpoint_model = config->value("endpoint_model", std::string());
      }
    } catch (const json::exception& e) {
      std::cerr << "flotilla eval: " << (job_dir / "config.json").string() << ": " << e.what() << "\n";
      return 2;
    }
  }
  for (const std::string& a : f.agents) {
    if (a != "oracle" && a != "nop" && a != "mini" && a != "terminal" && !IsAgentCli(a)) {
      std::cerr << "flotilla eval: -a " << a
                << ": unknown agent (built in: oracle, nop, mini, terminal; agent CLIs: pi, codex)\n";
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
                   {"model", f.worker.model_prefix}, {"endpoint_model", f.worker.endpoint_model}};
    if (absl::Status s = WriteJson(job_dir / "config.json", config); !s.ok()) {
      std::cerr << "flotilla eval: " << s.message() << "\n";
      return 1;
    }
  }
  // Environments first; a task whose environment does not build gets env_build_failed trials.
  std::map<size_t, std::string> build_errors;
  // An agent CLI's trials run in the task's environment with the CLI's read-only layers on top.
  std::map<std::pair<size_t, std::string>, worker::TerminalTask> cli_tasks;
  std::map<std::pair<size_t, std::string>, std::string> cli_errors;
  {
    environments::EnvBuilder builder(CliEnvBuilderOptions(f.env_store));
    for (size_t i = 0; i < tasks->size(); ++i) {
      absl::Status s = PrepareTaskEnvironment(builder, &(*tasks)[i], nullptr);
      if (!s.ok()) {
        build_errors[i] = std::string(s.message());
        continue;
      }
      for (const std::string& a : f.agents) {
        if (!IsAgentCli(a) || cli_tasks.count({i, a}) != 0 || cli_errors.count({i, a}) != 0) continue;
        worker::TerminalTask t = (*tasks)[i];
        absl::Status added = AddAgentLayer(builder, a, fs::absolute(f.agents_dir).string(), &t);
        if (added.ok()) {
          cli_tasks.emplace(std::make_pair(i, a), std::move(t));
        } else {
          cli_errors[{i, a}] = std::string(added.message());
        }
      }
    }
  }
  std::vector<Trial> trials;
  for (const std::string& agent : f.agents) {
    for (size_t t = 0; t < tasks->size(); ++t) {
      for (int a = 1; a <= f.attempts; ++a) {
        Trial tr{.task = t, .agent = agent, .attempt = a, .name = eval::TrialName((*tasks)[t].name, agent, a),
                 .result = std::nullopt};
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
  // Every trial's sandbox comes from the scheduler's front door, like any other sample's.
  app::PlatformOptions po;
  po.worker = f.worker;
  const bool any_cli = std::any_of(f.agents.begin(), f.agents.end(), IsAgentCli);
  // Agent CLIs reach the worker's wire APIs through each sandbox's endpoint.
  po.worker.http_address = f.http.empty() && any_cli ? "127.0.0.1:0" : f.http;
  po.worker.dashboard.eval_jobs_dir = fs::absolute(f.jobs_dir).string();
  po.image_dir = f.env_store;
  const app::EmbeddedWorkerOptions& wo = po.worker;
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "flotilla eval: " << platform.status().message() << "\n";
    return 1;
  }
  app::EmbeddedWorker* const w = &(*platform)->worker();
  if (!f.http.empty()) std::cerr << "eval: dashboard on http://" << w->http_address() << "/#eval\n";
  worker::SandboxClient& sandbox = (*platform)->sandboxes();
  const std::string model = w->service().ModelName();
  const std::string store_path = w->store().path();
  std::map<std::string, worker::ExternalAgentSpec> clis;
  int worker_port = 0;
  if (any_cli) {
    const std::string addr = w->http_address();
    worker_port = std::stoi(addr.substr(addr.rfind(':') + 1));
    for (const std::string& a : f.agents) {
      if (!IsAgentCli(a) || clis.count(a) != 0) continue;
      auto spec = AgentCliSpec(a, f.agents_dir, w->config().max_context, static_cast<int>(f.scaffold.max_tokens));
      if (!spec.ok()) {
        std::cerr << "flotilla eval: " << spec.status().message() << "\n";
        return 2;
      }
      clis.emplace(a, std::move(*spec));
    }
  }
  std::mutex mu;
  size_t next = 0, finished = 0, total = 0;
  for (const Trial& tr : trials) total += tr.result.has_value() ? 0 : 1;
  // Trials by outcome and those running, at the dashboard's /metrics.
  MetricsRegistry& metrics = (*platform)->metrics();
  Gauge& running = metrics.GetGauge("flotilla_eval_trials_running", "Eval trials running now");
  Gauge& pending = metrics.GetGauge("flotilla_eval_trials_pending", "Eval trials of the job not started yet");
  pending.Set(static_cast<double>(total));
  auto outcomes = [&metrics](const std::string& agent, const std::string& outcome) -> Counter& {
    return metrics.GetCounter("flotilla_eval_trials_total",
                              "Eval trials finished, by agent and outcome (passed, failed or the error type)",
                              {{"agent", agent}, {"outcome", outcome}});
  };
  for (const std::string& agent : f.agents) {
    outcomes(agent, "passed").Add(0);  // present at 0 before the first trial ends
    outcomes(agent, "failed").Add(0);
  }
  ProgressBar bar({.label = "eval", .total = total});
  auto work = [&] {
    for (;;) {
      Trial* tr = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        while (next < trials.size() && trials[next].result.has_value()) ++next;
        if (next >= trials.size() || stop.received() != 0) return;
        tr = &trials[next++];
      }
      pending.Add(-1);
      running.Add(1);
      auto cli_task = cli_tasks.find({tr->task, tr->agent});
      const worker::TerminalTask& task = cli_task != cli_tasks.end() ? cli_task->second : (*tasks)[tr->task];
      eval::TrialResult r;
      r.task = task.name;
      r.agent = tr->agent;
      r.attempt = tr->attempt;
      r.model = tr->agent == "oracle" || tr->agent == "nop" ? "" : model;
      auto t0 = std::chrono::steady_clock::now();
      if (auto be = build_errors.find(tr->task); be != build_errors.end()) {
        r.error_type = "env_build_failed";
        r.detail = be->second;
      } else if (auto ce = cli_errors.find({tr->task, tr->agent}); ce != cli_errors.end()) {
        r.error_type = "env_build_failed";
        r.detail = ce->second;
      } else {
        worker::ScaffoldOptions so = f.scaffold;
        so.scaffold = tr->agent == "terminal" ? "terminal" : "mini";
        so.agent = tr->agent == "oracle" ? "reference" : tr->agent == "nop" ? "none" : "model";
        if (IsAgentCli(tr->agent)) {
          so.agent = "cli";
          so.agent_cli = &clis.at(tr->agent);
          so.worker_port = worker_port;
        }
        so.experiment = wo.experiment;
        so.seed = f.seed + static_cast<uint64_t>(tr - trials.data());
        auto res = RunScaffoldWhenThereIsRoom(w->service(), sandbox, task, so, stop);
        r.error_type = ErrorType(res);
        if (res.ok()) {
          r.reward = res->reward;
          r.detail = res->detail;
          r.status = v1::TrajectoryStatus_Name(res->status);
          r.trajectory_id = res->trajectory_id;
          r.trajectory_store = store_path;
          r.steps = res->steps;
          if (auto traj = w->store().Get(res->trajectory_id); traj.ok()) r.tokens = eval::CountTrialTokens(*traj);
        } else {
          r.detail = std::string(res.status().message());
        }
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::error_code ec;
      fs::create_directories(job_dir / tr->name, ec);
      // A trial whose result cannot be written stays missing, so --resume runs it again.
      if (absl::Status s = WriteJson(job_dir / tr->name / "result.json", eval::TrialResultToJson(r)); !s.ok()) {
        std::cerr << "flotilla eval: " << s.message() << "\n";
      }
      outcomes(tr->agent, !r.error_type.empty() ? r.error_type : r.reward >= 1.0 ? "passed" : "failed").Add();
      running.Add(-1);
      std::lock_guard<std::mutex> lock(mu);
      tr->result = r;
      ++finished;
      std::string line = absl::StrFormat("%s reward=%g%s", tr->name, r.reward,
                                         r.error_type.empty() ? "" : " error=" + r.error_type);
      // A terminal gets one redrawn bar; a log keeps one line per trial.
      if (bar.tty()) {
        bar.Update(finished, line);
      } else {
        std::cerr << absl::StrFormat("[%d/%d] %s\n", finished, total, line);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < f.concurrency; ++i) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  if (bar.tty()) bar.Finish();
  eval::JobShape shape{.tasks = {}, .agents = f.agents, .model = model, .attempts = f.attempts};
  for (const worker::TerminalTask& t : *tasks) shape.tasks.push_back(t.name);
  std::vector<eval::TrialResult> ran;
  for (const Trial& tr : trials) {
    if (tr.result.has_value()) ran.push_back(*tr.result);
  }
  json summary = eval::SummarizeJob(shape, ran);
  summary["job_dir"] = job_dir.string();
  if (absl::Status s = WriteJson(job_dir / "result.json", summary); !s.ok()) {
    std::cerr << "flotilla eval: " << s.message() << "\n";
    return 1;
  }
  // The report shows each trial's transcript from the store its result names.
  std::map<std::string, std::string> transcripts;
  for (const eval::TrialResult& t : ran) {
    if (t.trajectory_id.empty() || t.trajectory_store != store_path) continue;
    if (auto traj = w->store().Get(t.trajectory_id); traj.ok()) transcripts[t.trajectory_id] = eval::TranscriptText(*traj);
  }
  {
    std::ofstream html(job_dir / "report.html");
    html << eval::RenderJobReport(job_dir.filename().string(), summary, transcripts);
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
