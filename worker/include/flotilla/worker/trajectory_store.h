// TrajectoryStore: durable normalized trajectories in one SQLite file (WAL), indexed by
// experiment, task and status. Put() replaces a trajectory with the same id, so a session can
// be saved after every turn and survive a crash of the worker with all completed turns.
//
// Thread-safety: thread-safe (the Database serializes writers).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/common/sqlite.h"
#include "flotilla/proto/trajectory.pb.h"

namespace flotilla::worker {

struct TrajectoryQuery {
  std::string experiment;   // empty: any
  std::string task;         // empty: any
  std::optional<v1::TrajectoryStatus> status;
};

class TrajectoryStore {
 public:
  static absl::StatusOr<std::unique_ptr<TrajectoryStore>> Open(const std::string& path);

  absl::Status Put(const v1::Trajectory& trajectory);
  absl::StatusOr<v1::Trajectory> Get(const std::string& id);
  // Calls `fn` for each matching trajectory in insertion order; stops at the first error.
  absl::Status ForEach(const TrajectoryQuery& query,
                       const std::function<absl::Status(const v1::Trajectory&)>& fn);
  absl::StatusOr<int64_t> Count(const TrajectoryQuery& query);
  const std::string& path() const { return db_->path(); }

 private:
  explicit TrajectoryStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
};

// One trajectory as a single JSON line (proto3 JSON mapping, field names as in the .proto).
absl::StatusOr<std::string> TrajectoryToJsonLine(const v1::Trajectory& trajectory);

}  // namespace flotilla::worker
