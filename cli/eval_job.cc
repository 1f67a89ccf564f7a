#include "eval_job.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/progress.h"
#include "flotilla/worker/pass_at_k.h"
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
  json result;       // empty until it ran (or was found done)
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

json Summarize(const std::vector<worker::TerminalTask>& tasks, const std::vector<std::string>& agents,
               const std::vector<Trial>& trials, int k) {
  json out = json::object();
  double p1_sum = 0, pk_sum = 0;
  int pairs = 0, errors = 0, ran = 0;
  json per_agent = json::object();
  for (const std::string& agent : agents) {
    std::vector<double> rewards, p1s, pks;
    int agent_errors = 0;
    for (size_t t = 0; t < tasks.size(); ++t) {
      int n = 0, c = 0;
      for (const Trial& tr : trials) {
        if (tr.task != t || tr.agent != agent || tr.result.is_null()) continue;
        ++n;
        double reward = tr.result.value("reward", 0.0);
        rewards.push_back(reward);
        c += reward >= 1.0 ? 1 : 0;
        if (!tr.result.value("error_type", std::string()).empty()) ++agent_errors;
      }
      if (n == 0) continue;
      p1s.push_back(worker::PassAtK(n, c, 1));
      pks.push_back(worker::PassAtK(n, c, std::min(k, n)));
    }
    worker::MeanAndError m = worker::MeanWithStandardError(rewards);
    worker::MeanAndError p1 = worker::MeanWithStandardError(p1s);
    worker::MeanAndError pk = worker::MeanWithStandardError(pks);
    per_agent[agent] = {{"tasks", p1s.size()},         {"trials", rewards.size()}, {"errors", agent_errors},
                        {"mean_reward", m.mean},       {"reward_stderr", m.standard_error},
                        {"pass@1", p1.mean},           {absl::StrCat("pass@", k), pk.mean}};
    for (double v : p1s) p1_sum += v;
    for (double v : pks) pk_sum += v;
    pairs += static_cast<int>(p1s.size());
    errors += agent_errors;
    ran += static_cast<int>(rewards.size());
  }
  out["agents"] = per_agent;
  out["tasks"] = tasks.size();
  out["trials"] = ran;
  out["errors"] = errors;
  out["k"] = k;
  out["pass@1"] = pairs > 0 ? p1_sum / pairs : 0.0;
  out["pass@k"] = pairs > 0 ? pk_sum / pairs : 0.0;
  return out;
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
    } catch (const json::exception& e) {
      std::cerr << "flotilla eval: " << (job_dir / "config.json").string() << ": " << e.what() << "\n";
      return 2;
    }
  }
  for (const std::string& a : f.agents) {
    if (a != "oracle" && a != "nop" && a != "mini" && a != "terminal") {
      std::cerr << "flotilla eval: -a " << a << ": unknown agent (built in: oracle, nop, mini, terminal)\n";
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
                   {"env_store", f.env_store},     {"job_name", name}};
    if (absl::Status s = WriteJson(job_dir / "config.json", config); !s.ok()) {
      std::cerr << "flotilla eval: " << s.message() << "\n";
      return 1;
    }
  }
  // Environments first; a task whose environment does not build gets env_build_failed trials.
  std::map<size_t, std::string> build_errors;
  {
    environments::EnvBuilder builder(CliEnvBuilderOptions(f.env_store));
    for (size_t i = 0; i < tasks->size(); ++i) {
      absl::Status s = PrepareTaskEnvironment(builder, &(*tasks)[i], nullptr);
      if (!s.ok()) build_errors[i] = std::string(s.message());
    }
  }
  std::vector<Trial> trials;
  for (const std::string& agent : f.agents) {
    for (size_t t = 0; t < tasks->size(); ++t) {
      for (int a = 1; a <= f.attempts; ++a) {
        Trial tr{.task = t, .agent = agent, .attempt = a, .name = absl::StrCat((*tasks)[t].name, "__", agent, "__", a),
                 .result = json()};
        auto done = ReadJson(job_dir / tr.name / "result.json");
        if (done.ok()) {
          std::string error = done->value("error_type", std::string());
          bool rerun = !error.empty() && (f.filter_errors.empty() ||
                                          std::find(f.filter_errors.begin(), f.filter_errors.end(), error) !=
                                              f.filter_errors.end());
          if (!rerun) tr.result = *done;
        }
        trials.push_back(std::move(tr));
      }
    }
  }
  // Every trial's sandbox comes from the scheduler's front door, like any other sample's.
  app::PlatformOptions po;
  po.worker = f.worker;
  po.worker.http_address = f.http;
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
  std::mutex mu;
  size_t next = 0, finished = 0, total = 0;
  for (const Trial& tr : trials) total += tr.result.is_null() ? 1 : 0;
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
    (void)outcomes(agent, "passed");
    (void)outcomes(agent, "failed");
  }
  ProgressBar bar({.label = "eval", .total = total});
  auto work = [&] {
    for (;;) {
      Trial* tr = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        while (next < trials.size() && !trials[next].result.is_null()) ++next;
        if (next >= trials.size() || stop.received() != 0) return;
        tr = &trials[next++];
      }
      pending.Add(-1);
      running.Add(1);
      const worker::TerminalTask& task = (*tasks)[tr->task];
      json r = {{"task", task.name},   {"agent", tr->agent}, {"attempt", tr->attempt},
                {"reward", 0.0},       {"error_type", ""},   {"detail", ""},
                {"trajectory_id", ""}, {"steps", 0}};
      auto t0 = std::chrono::steady_clock::now();
      if (auto be = build_errors.find(tr->task); be != build_errors.end()) {
        r["error_type"] = "env_build_failed";
        r["detail"] = be->second;
      } else {
        worker::ScaffoldOptions so = f.scaffold;
        so.scaffold = tr->agent == "terminal" ? "terminal" : "mini";
        so.agent = tr->agent == "oracle" ? "reference" : tr->agent == "nop" ? "none" : "model";
        so.experiment = wo.experiment;
        so.seed = f.seed + static_cast<uint64_t>(tr - trials.data());
        auto res = RunScaffoldWhenThereIsRoom(w->service(), sandbox, task, so, stop);
        r["error_type"] = ErrorType(res);
        if (res.ok()) {
          r["reward"] = res->reward;
          r["detail"] = res->detail;
          r["status"] = v1::TrajectoryStatus_Name(res->status);
          r["trajectory_id"] = res->trajectory_id;
          r["steps"] = res->steps;
        } else {
          r["detail"] = std::string(res.status().message());
        }
      }
      r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::error_code ec;
      fs::create_directories(job_dir / tr->name, ec);
      (void)WriteJson(job_dir / tr->name / "result.json", r);
      const std::string error = r["error_type"].get<std::string>();
      outcomes(tr->agent, !error.empty() ? error : r["reward"].get<double>() >= 1.0 ? "passed" : "failed").Add();
      running.Add(-1);
      std::lock_guard<std::mutex> lock(mu);
      tr->result = r;
      ++finished;
      std::string line = absl::StrFormat("%s reward=%g%s", tr->name, r["reward"].get<double>(),
                                         error.empty() ? "" : " error=" + error);
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
  json summary = Summarize(*tasks, f.agents, trials, f.attempts);
  summary["job_dir"] = job_dir.string();
  (void)WriteJson(job_dir / "result.json", summary);
  std::cout << "eval: job " << job_dir.string() << std::endl;
  std::cout << absl::StrFormat("eval: tasks=%d trials=%d pass@1=%.3f pass@k=%.3f errors=%d",
                               summary["tasks"].get<int>(), summary["trials"].get<int>(),
                               summary["pass@1"].get<double>(), summary["pass@k"].get<double>(),
                               summary["errors"].get<int>())
            << std::endl;
  if (stop.received() != 0) return stop.exit_code();
  return 0;
}

}  // namespace flotilla::cli
