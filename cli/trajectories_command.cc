// flotilla trajectories export: stored trajectories as JSON lines on stdout, token-exact (the
// proto3 JSON of flotilla.v1.Trajectory, one per line: ids, loss mask, logprobs, versions,
// routing per turn).
//
//   flotilla trajectories export --db FILE [--experiment E] [--task T] [--status S]
//   flotilla trajectories export --job JOBS_DIR/NAME     an eval job's trials, in trial order,
//                                                        from the store each result.json names
//   ... --format sft|rl [--min-reward R]                 training records instead, one line per
//                                                        segment (eval/training_records.h), of the
//                                                        trajectories rewarded at least R
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

#include "commands.h"
#include "flotilla/eval/job_folder.h"
#include "flotilla/eval/training_records.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::cli {

void AddTrajectoriesCommand(CLI::App& app, int* exit_code) {
  CLI::App* traj = app.add_subcommand("trajectories", "Export stored trajectories");
  traj->require_subcommand(1);
  CLI::App* exp = traj->add_subcommand("export", "Write trajectories as JSONL to stdout");
  struct Args {
    std::string db, job, experiment, task, status, format = "trajectory";
    double min_reward = -1e300;
  };
  auto a = std::make_shared<Args>();
  exp->add_option("--db", a->db, "trajectory store (SQLite file)");
  exp->add_option("--job", a->job, "an eval job folder: its trials' trajectories");
  exp->add_option("--experiment", a->experiment, "only this experiment");
  exp->add_option("--task", a->task, "only this task");
  exp->add_option("--status", a->status, "only this status (OK, FAILED, TIMED_OUT, INTERRUPTED, CRASHED)");
  exp->add_option("--format", a->format,
                  "trajectory (the proto3 JSON, token-exact), sft (chat messages with ids and loss mask) or rl "
                  "(per-token ids, loss mask, logprobs, policy versions), one line per segment for sft and rl");
  exp->add_option("--min-reward", a->min_reward, "only trajectories rewarded at least this");
  exp->callback([a, exit_code] {
    std::optional<eval::TrainingFormat> format;
    if (a->format != "trajectory") {
      auto f = eval::ParseTrainingFormat(a->format);
      if (!f.ok()) {
        std::cerr << "flotilla trajectories export: " << f.status().message() << " (or trajectory)\n";
        *exit_code = 2;
        return;
      }
      format = *f;
    }
    int64_t records = 0;
    // One trajectory's lines in the format asked for; false when it is filtered out.
    auto write = [a, format, &records](const v1::Trajectory& t) -> absl::StatusOr<bool> {
      if (t.reward() < a->min_reward) return false;
      if (!format.has_value()) {
        auto line = worker::TrajectoryToJsonLine(t);
        if (!line.ok()) return line.status();
        std::cout << *line << "\n";
        ++records;
        return true;
      }
      for (const nlohmann::json& r : eval::TrainingRecords(t, *format)) {
        std::cout << r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        ++records;
      }
      return true;
    };
    if (a->db.empty() == a->job.empty()) {
      std::cerr << "flotilla trajectories export: give --db FILE or --job DIR (one of them)\n";
      *exit_code = 2;
      return;
    }
    if (!a->job.empty()) {
      if (!a->experiment.empty() || !a->task.empty() || !a->status.empty()) {
        std::cerr << "flotilla trajectories export: --job exports the whole job (no --experiment, --task, --status)\n";
        *exit_code = 2;
        return;
      }
      int64_t kept = 0;
      auto n = eval::ForEachJobTrajectory(a->job, [&](const eval::TrialResult&, const v1::Trajectory& t) {
        auto w = write(t);
        if (!w.ok()) return w.status();
        kept += *w ? 1 : 0;
        return absl::OkStatus();
      });
      std::cout.flush();
      if (!n.ok()) {
        std::cerr << "flotilla trajectories export: " << n.status().message() << "\n";
        *exit_code = 1;
        return;
      }
      std::cerr << "exported " << kept << " trajectories" << (format ? absl::StrCat(" (", records, " records)") : "")
                << "\n";
      return;
    }
    worker::TrajectoryQuery q;
    q.experiment = a->experiment;
    q.task = a->task;
    if (!a->status.empty()) {
      v1::TrajectoryStatus s;
      if (!v1::TrajectoryStatus_Parse(a->status, &s)) {
        std::cerr << "flotilla trajectories export: --status: unknown status '" << a->status << "'\n";
        *exit_code = 2;
        return;
      }
      q.status = s;
    }
    if (!std::filesystem::exists(a->db)) {
      std::cerr << "flotilla trajectories export: --db: " << a->db << " does not exist\n";
      *exit_code = 1;
      return;
    }
    auto store = worker::TrajectoryStore::Open(a->db);
    if (!store.ok()) {
      std::cerr << "flotilla trajectories export: " << store.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    int64_t n = 0;
    absl::Status st = (*store)->ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
      auto w = write(t);
      if (!w.ok()) return w.status();
      n += *w ? 1 : 0;
      return absl::OkStatus();
    });
    std::cout.flush();
    if (!st.ok()) {
      std::cerr << "flotilla trajectories export: " << st.message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cerr << "exported " << n << " trajectories" << (format ? absl::StrCat(" (", records, " records)") : "")
              << "\n";
  });
}

}  // namespace flotilla::cli
