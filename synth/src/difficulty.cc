#include "flotilla/synth/difficulty.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"
#include "flotilla/common/text_files.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/eval/task_environment.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/eval/trial_runner.h"
#include "flotilla/worker/terminal_task.h"
#include "nlohmann/json.hpp"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

constexpr char kExcluded[] = "excluded";

absl::Status WriteWhole(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError(absl::StrCat(tmp.string(), ": cannot write"));
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) return absl::InternalError(absl::StrCat(p.string(), ": ", ec.message()));
  return absl::OkStatus();
}

std::string DirName(std::string s) {
  for (char& c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '-';
  }
  return s;
}

bool IsTaskFolder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && (fs::exists(p / "task.toml", ec) || fs::exists(p / "task.yaml", ec));
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string BandText(const DifficultyBand& b) { return absl::StrFormat("[%g, %g]", b.lo, b.hi); }

struct Pending {
  std::string task;
  fs::path dir;
  worker::TerminalTask loaded;
  std::vector<std::optional<eval::TrialResult>> results;  // by attempt - 1
};

struct ToRun {
  Pending* task = nullptr;
  int attempt = 0;
};

}  // namespace

absl::StatusOr<DifficultySummary> MeasureDifficulty(const DifficultyOptions& o, const std::string& out_dir,
                                                    SynthState& state, environments::EnvBuilder& builder,
                                                    worker::SandboxClient& sandboxes,
                                                    const std::function<void(std::string_view)>& progress) {
  RETURN_IF_ERROR(CheckDifficultyOptions(o));
  if (o.agent.empty()) return absl::InvalidArgumentError("--difficulty-agent: required");
  if (o.attempts < 1) return absl::InvalidArgumentError("--difficulty-attempts: must be at least 1");
  if (o.policy == nullptr) return absl::InvalidArgumentError("DifficultyOptions.policy: required");
  auto say = [&](const std::string& line) {
    if (progress) progress(line + "\n");
  };
  auto decide = [&](const std::string& subject, const std::string& decision, const std::string& reason) {
    say(absl::StrCat("synth: difficulty: ", subject, ": ", decision, " (", reason, ")"));
    return state.Decide("difficulty", subject, decision, reason);
  };
  DifficultySummary sum;
  sum.policy = eval::AgentUsesModel(o.agent) ? absl::StrCat(o.agent, "@", o.policy->ModelName()) : o.agent;
  const fs::path out(out_dir);
  const fs::path trials_dir = out / ".work" / "difficulty" / DirName(sum.policy);

  // The task folders: OUT's own and those excluded earlier.
  std::map<std::string, fs::path> tasks;
  std::error_code ec;
  for (const fs::path& parent : {out, out / kExcluded}) {
    if (!fs::is_directory(parent, ec)) continue;
    for (const auto& e : fs::directory_iterator(parent, ec)) {
      if (!IsTaskFolder(e.path())) continue;
      const std::string name = e.path().filename().string();
      if (auto [it, fresh] = tasks.emplace(name, e.path()); !fresh) {
        return absl::FailedPreconditionError(absl::StrCat("task '", name, "' is both ", it->second.string(), " and ",
                                                          e.path().string(), ": remove one"));
      }
    }
  }
  sum.tasks = static_cast<int>(tasks.size());

  // What is left to run: tasks without a full measurement, attempts without a counting result.
  std::vector<std::unique_ptr<Pending>> pending;
  std::vector<ToRun> to_run;
  for (const auto& [name, dir] : tasks) {
    ASSIGN_OR_RETURN(std::optional<DifficultyRow> row, state.Difficulty(name, sum.policy));
    if (row && row->attempts >= o.attempts) {
      ++sum.resumed;
      say(absl::StrFormat("synth: difficulty: %s: resumed (%s, solved %d of %d by %s)", name, row->label, row->solved,
                          row->attempts, sum.policy));
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->task = name;
    p->dir = dir;
    auto loaded = worker::LoadTerminalTask(dir.string());
    absl::Status ready = loaded.status();
    if (loaded.ok()) {
      p->loaded = std::move(*loaded);
      ready = eval::PrepareTaskEnvironment(builder, &p->loaded, nullptr);
    }
    if (!ready.ok()) {
      ++sum.unknown;
      RETURN_IF_ERROR(decide(name, "unknown", absl::StrCat("the task does not load or build: ", ready.message())));
      continue;
    }
    p->results.resize(o.attempts);
    for (int a = 1; a <= o.attempts; ++a) {
      const fs::path file = trials_dir / eval::TrialName(name, o.agent, a) / "result.json";
      auto j = nlohmann::json::parse(ReadFileOrEmpty(file), nullptr, false);
      if (!j.is_discarded()) {
        auto r = eval::TrialResultFromJson(j, file.string());
        if (r.ok() && AttemptCounts(*r)) {
          p->results[a - 1] = std::move(*r);
          continue;
        }
      }
      to_run.push_back({p.get(), a});
    }
    pending.push_back(std::move(p));
  }

  // The trials, `concurrency` at a time, each result written as it ends.
  std::mutex mu;
  size_t next = 0;
  absl::Status write_error;
  auto work = [&] {
    for (;;) {
      ToRun job;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= to_run.size()) return;
        job = to_run[next++];
      }
      eval::TrialRunOptions to;
      to.agent = o.agent;
      to.attempt = job.attempt;
      to.scaffold = o.scaffold;
      to.scaffold.experiment = "synth-difficulty";
      to.scaffold.seed = o.scaffold.seed.value_or(0) + Fnv1a(job.task->task) + static_cast<uint64_t>(job.attempt);
      eval::TrialRun run = eval::RunTrial(*o.policy, sandboxes, o.store, job.task->loaded, to);
      const std::string trial = eval::TrialName(job.task->task, o.agent, job.attempt);
      std::error_code mk;
      fs::create_directories(trials_dir / trial, mk);
      absl::Status w = WriteWhole(trials_dir / trial / "result.json", eval::TrialResultToJson(run.result).dump(2));
      std::lock_guard<std::mutex> lock(mu);
      if (!w.ok() && write_error.ok()) write_error = w;
      ++sum.trials;
      say(absl::StrFormat("synth: difficulty [%d/%d] %s reward=%g%s", sum.trials, to_run.size(), trial,
                          run.result.reward, run.result.error_type.empty() ? "" : " error=" + run.result.error_type));
      job.task->results[job.attempt - 1] = std::move(run.result);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min<int>(o.concurrency, static_cast<int>(to_run.size())); ++i) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  RETURN_IF_ERROR(write_error);

  // Each task's solve rate, label and record.
  std::set<std::string> measured_now;
  for (const auto& p : pending) {
    std::vector<eval::TrialResult> attempts;
    for (auto& r : p->results) {
      if (r.has_value()) attempts.push_back(std::move(*r));
    }
    absl::StatusOr<DifficultyRow> summed = SummarizeAttempts(p->task, sum.policy, attempts);
    if (!summed.ok()) {
      ++sum.unknown;
      RETURN_IF_ERROR(decide(p->task, "unknown", std::string(summed.status().message())));
      continue;
    }
    const DifficultyRow& row = *summed;
    RETURN_IF_ERROR(state.SetDifficulty(row));
    RETURN_IF_ERROR(decide(p->task, row.label, absl::StrFormat("solve rate %.3g: %s", row.solve_rate, row.reason)));
    measured_now.insert(p->task);
    ++sum.measured;
  }

  // The band: out-of-band tasks to excluded/, in-band ones back; task.toml says what it decided.
  for (const auto& [name, dir] : tasks) {
    ASSIGN_OR_RETURN(std::optional<DifficultyRow> row, state.Difficulty(name, sum.policy));
    if (!row) continue;
    sum.labels[row->label]++;
    const bool excluded_now = dir.parent_path().filename() == kExcluded;
    fs::path at = dir;
    std::string band = "no band given";
    if (o.band) {
      const DifficultyBand& b = *o.band;
      const bool below = row->solve_rate < b.lo - 1e-9, above = row->solve_rate > b.hi + 1e-9;
      band = below || above ? absl::StrFormat("excluded: solve rate %.3g %s the band %s", row->solve_rate,
                                              below ? "below" : "above", BandText(b))
                            : absl::StrFormat("kept: solve rate %.3g within the band %s", row->solve_rate, BandText(b));
      const fs::path want = below || above ? out / kExcluded / name : out / name;
      if (want != at) {
        fs::create_directories(want.parent_path(), ec);
        fs::rename(at, want, ec);
        if (ec) return absl::InternalError(absl::StrCat("moving ", at.string(), " to ", want.string(), ": ", ec.message()));
        RETURN_IF_ERROR(decide(name, below || above ? "excluded" : "restored",
                               absl::StrCat(band, " (", row->reason, "); moved to ",
                                            fs::relative(want, out).string())));
        at = want;
      }
    } else if (measured_now.count(name) == 0) {
      if (excluded_now) ++sum.excluded;
      continue;  // measured before and not moved: its task.toml is as that run left it
    }
    if (at.parent_path().filename() == kExcluded) ++sum.excluded;
    if (fs::exists(at / "task.toml", ec)) {
      RETURN_IF_ERROR(WriteWhole(at / "task.toml", TaskTomlWithDifficulty(ReadFileOrEmpty(at / "task.toml"), *row, band)));
    }
  }
  std::vector<std::string> labels;
  for (const char* l : {"easy", "medium", "hard", "unsolved"}) labels.push_back(absl::StrCat(l, "=", sum.labels[l]));
  sum.report = absl::StrFormat("difficulty: policy=%s attempts=%d tasks=%d measured=%d resumed=%d unknown=%d "
                               "trials=%d %s band=%s excluded=%d\n",
                               sum.policy, o.attempts, sum.tasks, sum.measured, sum.resumed, sum.unknown, sum.trials,
                               absl::StrJoin(labels, " "),
                               o.band ? absl::StrFormat("%g:%g", o.band->lo, o.band->hi) : "none", sum.excluded);
  if (progress) progress(absl::StrCat("synth: ", sum.report));
  return sum;
}

absl::StatusOr<DifficultySummary> MeasureFolderDifficulty(const DifficultyOptions& options, const std::string& out_dir,
                                                          const environments::EnvBuilderOptions& builder_options,
                                                          worker::SandboxClient& sandboxes,
                                                          const std::function<void(std::string_view)>& progress) {
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--out '", out_dir, "': not a folder of tasks"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SynthState> state, SynthState::Open((fs::path(out_dir) / "synth.db").string()));
  environments::EnvBuilder builder(builder_options);
  return MeasureDifficulty(options, out_dir, *state, builder, sandboxes, progress);
}

}  // namespace flotilla::synth
