// TrajectoryStore: the one store of normalized trajectories (flotilla.v1.Trajectory) for every
// sample, whether an RL rollout, an eval run or an `up` session: one SQLite file (WAL), indexed
// by experiment, task, status and group. Put() replaces a trajectory with the same id, so a
// session can be saved after every turn and survive a crash of the worker with all completed
// turns. For RL it also keeps which groups a trainer has consumed and each experiment's small
// durable state (counters, the last weights), written in the same transactions, so the trainer
// bridge reads and writes samples only through this store.
//
// Thread-safety: thread-safe (the Database serializes writers).
#pragma once

#include <functional>
#include <map>
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
  std::string group_id;     // empty: any
  std::optional<bool> consumed;
};

class TrajectoryStore {
 public:
  static absl::StatusOr<std::unique_ptr<TrajectoryStore>> Open(const std::string& path,
                                                               const DatabaseOptions& options = {});

  absl::Status Put(const v1::Trajectory& trajectory);
  // Writes every trajectory in one transaction (all or none): a complete RL group.
  absl::Status PutAll(const std::vector<v1::Trajectory>& trajectories);
  // Marks the trajectories of `experiment` in `group_ids` consumed (sent to a trainer) and
  // sets `state` (see SetState) in the same transaction.
  absl::Status MarkConsumed(const std::string& experiment, const std::vector<std::string>& group_ids,
                            const std::map<std::string, std::string>& state);
  // The group ids of `experiment`'s unconsumed trajectories, in the order each group's first
  // trajectory was stored (ungrouped trajectories are left out).
  absl::StatusOr<std::vector<std::string>> UnconsumedGroups(const std::string& experiment);
  // An experiment's durable state: small key/value pairs, set together in one transaction.
  absl::Status SetState(const std::string& experiment, const std::map<std::string, std::string>& values);
  // The value of `key`, or `missing` when it was never set.
  absl::StatusOr<std::string> GetState(const std::string& experiment, const std::string& key,
                                       const std::string& missing);
  absl::StatusOr<v1::Trajectory> Get(const std::string& id);
  // Calls `fn` for each matching trajectory in insertion order; stops at the first error.
  absl::Status ForEach(const TrajectoryQuery& query,
                       const std::function<absl::Status(const v1::Trajectory&)>& fn);
  // The `limit` (>= 1) most recently stored matching trajectories, newest first.
  absl::StatusOr<std::vector<v1::Trajectory>> Newest(const TrajectoryQuery& query, int limit);
  absl::StatusOr<int64_t> Count(const TrajectoryQuery& query);
  const std::string& path() const { return db_->path(); }

 private:
  explicit TrajectoryStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  absl::Status Scan(const TrajectoryQuery& query, const std::string& order_and_limit,
                    const std::function<absl::Status(const v1::Trajectory&)>& fn);
  absl::Status PutInTransaction(const v1::Trajectory& trajectory);
  absl::Status SetStateInTransaction(const std::string& experiment, const std::map<std::string, std::string>& values);
  std::unique_ptr<Database> db_;
};

// One trajectory as a single JSON line (proto3 JSON mapping, field names as in the .proto).
absl::StatusOr<std::string> TrajectoryToJsonLine(const v1::Trajectory& trajectory);

}  // namespace flotilla::worker
