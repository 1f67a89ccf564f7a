#include "eval_trials.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/status.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/report_html.h"
#include "flotilla/eval/trial_runner.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/trajectory_store.h"
#include "nlohmann/json.hpp"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

}  // namespace

absl::Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& j) {
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

absl::StatusOr<std::string> RunModelTrials(const EvalJobFlags& f, const app::EmbeddedWorkerOptions& worker_options,
                                           size_t model_index, const std::vector<worker::TerminalTask>& tasks,
                                           const JobEnvironments& envs, const std::string& job_dir,
                                           std::vector<Trial>* trials_out, JobProgress* progress,
                                           const StopSignal& stop) {
  std::vector<Trial>& trials = *trials_out;
  // Every trial's sandbox comes from the scheduler's front door, like any other sample's.
  app::PlatformOptions po;
  po.worker = worker_options;
  const bool any_cli = std::any_of(f.agents.begin(), f.agents.end(), IsAgentCli);
  // Agent CLIs reach the worker's wire APIs through each sandbox's endpoint.
  po.worker.http_address = f.http.empty() && any_cli ? "127.0.0.1:0" : f.http;
  po.worker.dashboard.eval_jobs_dir = fs::absolute(f.jobs_dir).string();
  po.image_dir = f.env_store;
  const app::EmbeddedWorkerOptions& wo = po.worker;
  ASSIGN_OR_RETURN(std::unique_ptr<app::EmbeddedPlatform> platform, app::EmbeddedPlatform::Start(po));
  app::EmbeddedWorker* const w = &platform->worker();
  if (!f.http.empty()) std::cerr << "eval: dashboard on http://" << w->http_address() << "/#eval\n";
  worker::SandboxClient& sandbox = platform->sandboxes();
  const std::string model = w->service().ModelName();
  std::map<std::string, worker::ExternalAgentSpec> clis;
  int worker_port = 0;
  if (any_cli) {
    const std::string addr = w->http_address();
    worker_port = std::stoi(addr.substr(addr.rfind(':') + 1));
    for (const std::string& a : f.agents) {
      if (!IsAgentCli(a) || clis.count(a) != 0) continue;
      ASSIGN_OR_RETURN(worker::ExternalAgentSpec spec, AgentCliSpec(a, f.agents_dir, w->config().max_context,
                                                                     static_cast<int>(f.scaffold.max_tokens)));
      clis.emplace(a, std::move(spec));
    }
  }
  auto mine = [model_index](const Trial& t) { return t.model == model_index && !t.result.has_value(); };
  std::mutex mu;
  size_t next = 0;
  // Trials by outcome and those running, at the dashboard's /metrics.
  MetricsRegistry& metrics = platform->metrics();
  Gauge& running = metrics.GetGauge("flotilla_eval_trials_running", "Eval trials running now");
  Gauge& pending = metrics.GetGauge("flotilla_eval_trials_pending", "Eval trials of the job not started yet");
  pending.Set(static_cast<double>(std::count_if(trials.begin(), trials.end(), mine)));
  auto outcomes = [&metrics](const std::string& agent, const std::string& outcome) -> Counter& {
    return metrics.GetCounter("flotilla_eval_trials_total",
                              "Eval trials finished, by agent and outcome (passed, failed or the error type)",
                              {{"agent", agent}, {"outcome", outcome}});
  };
  for (const std::string& agent : f.agents) {
    outcomes(agent, "passed").Add(0);  // present at 0 before the first trial ends
    outcomes(agent, "failed").Add(0);
  }
  auto work = [&] {
    for (;;) {
      Trial* tr = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        while (next < trials.size() && !mine(trials[next])) ++next;
        if (next >= trials.size() || stop.received() != 0) return;
        tr = &trials[next++];
      }
      pending.Add(-1);
      running.Add(1);
      auto cli_task = envs.cli_tasks.find({tr->task, tr->agent});
      const worker::TerminalTask& task = cli_task != envs.cli_tasks.end() ? cli_task->second : tasks[tr->task];
      eval::TrialResult r;
      std::string agent_output;
      auto be = envs.build_errors.find(tr->task);
      auto ce = envs.cli_errors.find({tr->task, tr->agent});
      if (be != envs.build_errors.end() || ce != envs.cli_errors.end()) {
        r.task = task.name;
        r.agent = tr->agent;
        r.model = eval::AgentUsesModel(tr->agent) ? model : "";
        r.attempt = tr->attempt;
        r.error_type = "env_build_failed";
        r.detail = be != envs.build_errors.end() ? be->second : ce->second;
      } else {
        eval::TrialRunOptions to;
        to.agent = tr->agent;
        to.attempt = tr->attempt;
        to.scaffold = f.scaffold;
        if (IsAgentCli(tr->agent)) {
          to.agent_cli = &clis.at(tr->agent);
          to.worker_port = worker_port;
        }
        to.scaffold.experiment = wo.experiment;
        to.scaffold.cpu_request_millicores = f.cpu_request_millicores;
        to.scaffold.seed = f.seed + static_cast<uint64_t>(tr - trials.data());
        to.stopped = [&stop] { return stop.received() != 0; };
        eval::TrialRun run = eval::RunTrial(w->service(), sandbox, &w->store(), task, to);
        r = std::move(run.result);
        agent_output = std::move(run.agent_output);
      }
      std::error_code ec;
      fs::create_directories(fs::path(job_dir) / tr->name, ec);
      if (!agent_output.empty()) {
        // What an agent CLI printed: the first place to look when its trial failed.
        fs::create_directories(fs::path(job_dir) / tr->name / "agent", ec);
        std::ofstream(fs::path(job_dir) / tr->name / "agent" / "output.txt", std::ios::binary) << agent_output;
      }
      // A trial whose result cannot be written stays missing, so --resume runs it again.
      const fs::path file = fs::path(job_dir) / tr->name / "result.json";
      if (absl::Status s = WriteJsonFile(file, eval::TrialResultToJson(r)); !s.ok()) {
        std::cerr << "flotilla eval: " << s.message() << "\n";
      }
      outcomes(tr->agent, !r.error_type.empty() ? r.error_type : r.reward >= 1.0 ? "passed" : "failed").Add();
      running.Add(-1);
      std::lock_guard<std::mutex> lock(mu);
      tr->result = r;
      ++progress->finished;
      std::string line = absl::StrFormat("%s reward=%g%s", tr->name, r.reward,
                                         r.error_type.empty() ? "" : " error=" + r.error_type);
      // A terminal gets one redrawn bar; a log keeps one line per trial.
      if (progress->bar->tty()) {
        progress->bar->Update(progress->finished, line);
      } else {
        std::cerr << absl::StrFormat("[%d/%d] %s\n", progress->finished, progress->total, line);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < f.concurrency; ++i) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  return model;
}

std::map<std::string, std::string> JobTranscripts(const std::vector<eval::TrialResult>& trials) {
  std::map<std::string, std::unique_ptr<worker::TrajectoryStore>> stores;
  std::map<std::string, std::string> out;
  for (const eval::TrialResult& t : trials) {
    if (t.trajectory_id.empty() || t.trajectory_store.empty() || !fs::exists(t.trajectory_store)) continue;
    auto it = stores.find(t.trajectory_store);
    if (it == stores.end()) {
      auto opened = worker::TrajectoryStore::Open(t.trajectory_store);
      it = stores.emplace(t.trajectory_store, opened.ok() ? std::move(*opened) : nullptr).first;
    }
    if (it->second == nullptr) continue;
    if (auto traj = it->second->Get(t.trajectory_id); traj.ok()) out[t.trajectory_id] = eval::TranscriptText(*traj);
  }
  return out;
}

}  // namespace flotilla::cli
