// ExperimentStore: an RL experiment's samples and state, kept in the worker's trajectory store
// (worker::TrajectoryStore, the one store and schema for RL, eval and `up` sessions).
//
// Every sample is a worker episode whose session saves its trajectory (id
// "<experiment>/s<sample>") after every turn; when its group completes, the group's
// trajectories are written again whole, in one transaction, with their group id and final
// reward, so a kill -9 of the bridge loses no completed group and a group is never half
// stored. Trajectories without a group id are episodes still running (or cut off by a crash). A group is marked consumed once it has been sent to a trainer; on restart the
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

struct EpisodeFigures {
  int64_t samples = 0;
  int64_t failed = 0;
  int64_t sandboxes = 0;        // samples whose sandbox the scheduler placed
  double turns_mean = 0;
  double tool_calls_mean = 0;
};

class ExperimentStore {
 public:
  // Opens (or creates) the trajectory store at `path` and owns it.
  static absl::StatusOr<std::unique_ptr<ExperimentStore>> Open(const std::string& path,
                                                               const std::string& experiment);
  // Over a store owned elsewhere (the embedded default's one store); `store` must outlive it.
  ExperimentStore(worker::TrajectoryStore* store, std::string experiment);

  // Writes a complete group (its samples' worker trajectories, group id set) atomically.
  absl::Status PutGroup(const std::vector<v1::Trajectory>& group);
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
  // Rewards of the experiment's completed samples in completion order (a failed sample's is
  // the failure reward it was given).
  [[nodiscard]] absl::StatusOr<std::vector<double>> Rewards();
  // Turns, tool calls and sandboxes over the completed samples.
  [[nodiscard]] absl::StatusOr<EpisodeFigures> Figures();

  [[nodiscard]] worker::TrajectoryStore& trajectories() { return *store_; }
  [[nodiscard]] const std::string& experiment() const { return experiment_; }

  // The batch assembler's view of a worker trajectory (see rollout_sample.h): the last
  // segment's tokens split at the first generated one, loss mask, logprobs, versions and
  // routing per token, turn starts; status other than OK or TIMED_OUT is a failed sample.
  // DataLoss when the id is not "<experiment>/s<N>" or the token arrays disagree.
  static absl::StatusOr<RolloutSample> FromTrajectory(const v1::Trajectory& t);

 private:
  std::unique_ptr<worker::TrajectoryStore> owned_;
  worker::TrajectoryStore* store_;
  std::string experiment_;
};

}  // namespace flotilla::trainer_bridge
