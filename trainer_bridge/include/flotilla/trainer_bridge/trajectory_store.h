// TrajectoryStore: the experiment's durable state in one SQLite file (WAL).
//
// Completed groups are written whole, in one transaction, as flotilla.v1.Trajectory records
// (common/proto/trajectory.proto: a prompt turn with loss mask 0, an assistant turn with the
// generated ids, logprobs, per-token policy versions and expert routing), so a kill -9 of the
// bridge loses no completed trajectory. A group is marked consumed once it has been sent to a
// trainer; on restart the unconsumed ones are trained on first. Counters (groups dispatched,
// per-dataset counts, policy version, step) are kept so a restart continues the experiment.
//
// Thread-safe (the Database serialises transactions).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/common/sqlite.h"
#include "flotilla/proto/trajectory.pb.h"
#include "flotilla/trainer_bridge/rollout_sample.h"

namespace flotilla::trainer_bridge {

struct StoredState {
  uint64_t groups_dispatched = 0;
  std::map<std::string, uint64_t> groups_by_dataset;
  int64_t policy_version = 0;
  std::string weights_path;       // the last published weights ("" before the first)
  int64_t step = 0;               // batches sent so far
};

class TrajectoryStore {
 public:
  static absl::StatusOr<std::unique_ptr<TrajectoryStore>> Open(const std::string& path,
                                                               const std::string& experiment);

  // Writes a complete group (all of its samples) atomically.
  absl::Status PutGroup(const std::vector<RolloutSample>& group);
  // Marks groups consumed (sent to a trainer) and advances the stored step.
  absl::Status MarkConsumed(const std::vector<uint64_t>& groups, int64_t step);
  // Every complete group not yet consumed, in the order it was stored.
  [[nodiscard]] absl::StatusOr<std::vector<std::vector<RolloutSample>>> LoadUnconsumed();
  [[nodiscard]] absl::StatusOr<std::vector<RolloutSample>> LoadGroup(uint64_t group);

  absl::Status SaveCounters(uint64_t groups_dispatched, const std::map<std::string, uint64_t>& by_dataset);
  absl::Status SavePolicy(int64_t version, const std::string& weights_path);
  [[nodiscard]] absl::StatusOr<StoredState> LoadState();
  // The experiment ran to its end (a later run starts afresh rather than resuming).
  absl::Status SetFinished(bool finished);
  [[nodiscard]] absl::StatusOr<bool> Finished();

  [[nodiscard]] absl::StatusOr<int64_t> CountTrajectories();
  // Rewards of every stored trajectory in completion order (for summaries).
  [[nodiscard]] absl::StatusOr<std::vector<double>> Rewards();

  // Conversions between the runner's sample and the normalized trajectory record.
  static v1::Trajectory ToTrajectory(const RolloutSample& s, const std::string& experiment);
  static absl::StatusOr<RolloutSample> FromTrajectory(const v1::Trajectory& t);

 private:
  TrajectoryStore(std::unique_ptr<Database> db, std::string experiment)
      : db_(std::move(db)), experiment_(std::move(experiment)) {}
  absl::Status SetMeta(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> GetMeta(const std::string& key, const std::string& dflt);

  std::unique_ptr<Database> db_;
  std::string experiment_;
};

}  // namespace flotilla::trainer_bridge
