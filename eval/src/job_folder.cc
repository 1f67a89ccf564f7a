#include "flotilla/eval/job_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::eval {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<nlohmann::json> ReadJsonFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not JSON"));
  return j;
}

}  // namespace

absl::StatusOr<std::vector<TrialResult>> LoadTrialResults(const std::string& job_dir) {
  std::error_code ec;
  if (!fs::exists(fs::path(job_dir) / "config.json", ec)) {
    return absl::NotFoundError(absl::StrCat(job_dir, ": not an eval job folder (no config.json)"));
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(job_dir, ec)) {
    if (e.is_directory(ec) && fs::exists(e.path() / "result.json", ec)) files.push_back(e.path() / "result.json");
  }
  std::sort(files.begin(), files.end());
  std::vector<TrialResult> out;
  for (const fs::path& f : files) {
    ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(f));
    ASSIGN_OR_RETURN(TrialResult r, TrialResultFromJson(j, f.string()));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<int64_t> ForEachJobTrajectory(
    const std::string& job_dir, const std::function<absl::Status(const TrialResult&, const v1::Trajectory&)>& fn) {
  ASSIGN_OR_RETURN(std::vector<TrialResult> trials, LoadTrialResults(job_dir));
  std::map<std::string, std::unique_ptr<worker::TrajectoryStore>> stores;
  int64_t n = 0;
  for (const TrialResult& t : trials) {
    if (t.trajectory_id.empty()) continue;
    const std::string file = (fs::path(job_dir) / TrialName(t.task, t.agent, t.attempt) / "result.json").string();
    if (t.trajectory_store.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": trajectory_store: missing (a job written before "
                                                           "results named their store)"));
    }
    auto& store = stores[t.trajectory_store];
    if (store == nullptr) {
      std::error_code ec;
      if (!fs::exists(t.trajectory_store, ec)) {
        return absl::NotFoundError(absl::StrCat(file, ": trajectory_store: ", t.trajectory_store, " does not exist"));
      }
      ASSIGN_OR_RETURN(store, worker::TrajectoryStore::Open(t.trajectory_store));
    }
    absl::StatusOr<v1::Trajectory> traj = store->Get(t.trajectory_id);
    if (!traj.ok()) {
      return absl::NotFoundError(absl::StrCat(file, ": trajectory_id: '", t.trajectory_id, "' is not in ",
                                              t.trajectory_store, " (", traj.status().message(), ")"));
    }
    RETURN_IF_ERROR(fn(t, *traj));
    ++n;
  }
  return n;
}

}  // namespace flotilla::eval
