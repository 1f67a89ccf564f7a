// ExperimentStore: an RL experiment's samples and state, kept in the worker's trajectory store
// (worker::TrajectoryStore, the one store and schema for RL, eval and `up` sessions).
//
// Completed groups are written whole, in one transaction, as flotilla.v1.Trajectory records
// (a prompt turn with loss mask 0, an assistant turn with the generated ids, logprobs,
// per-token policy versions and expert routing), so a kill -9 of the bridge loses no completed
// trajectory. A group is marked consumed once it has been sent to a trainer; on restart the
// unconsumed ones are trained on first. Counters (groups dispatched, per-dataset counts, policy
// version, step) are the experiment's state in the same store, so a restart continues it.
// Trajectory ids are "<experiment>/s<sample>" and group ids "g<group>", so experiments share
// one store without colliding.
//
// Thread-safe (the store serialises transactions).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/proto/trajectory.pb.h"
#include "flotilla/trainer_bridge/rollout_sample.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::trainer_bridge {

struct StoredState {
  uint64_t groups_dispatched = 0;
  std::map<std::string, uint64_t> groups_by_dataset;
  int64_t policy_version = 0;
  std::string weights_path;       // the last published weights ("" before the first)
  int64_t step = 0;               // batches sent so far
};

class ExperimentStore {
 public:
  // Opens (or creates) the trajectory store at `path` and owns it.
  static absl::StatusOr<std::unique_ptr<ExperimentStore>> Open(const std::string& path,
                                                               const std::string& experiment);
  // Over a store owned elsewhere (the embedded default's one store); `store` must outlive it.
  ExperimentStore(worker::TrajectoryStore* store, std::string experiment);

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
  // Rewards of the experiment's trajectories in completion order (0 for failed ones).
  [[nodiscard]] absl::StatusOr<std::vector<double>> Rewards();

  [[nodiscard]] worker::TrajectoryStore& trajectories() { return *store_; }
  [[nodiscard]] const std::string& experiment() const { return experiment_; }

  // Conversions between the runner's sample and the normalized trajectory record.
  static v1::Trajectory ToTrajectory(const RolloutSample& s, const std::string& experiment);
  static absl::StatusOr<RolloutSample> FromTrajectory(const v1::Trajectory& t);

 private:
  std::unique_ptr<worker::TrajectoryStore> owned_;
  worker::TrajectoryStore* store_;
  std::string experiment_;
};

}  // namespace flotilla::trainer_bridge
