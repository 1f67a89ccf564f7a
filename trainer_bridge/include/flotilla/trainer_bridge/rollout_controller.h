// RolloutController: decides which prompts to start and when completed groups may be trained on.
// It owns no engine and runs no model: the RolloutRunner executes its decisions, so its rules
// are testable on a FakeClock.
//
// Rules:
//  - Sample-level dispatch: at most `max_in_flight` samples generate at once. Whenever enough
//    samples have completed (of any group) to free a group's worth of slots, the next prompt is
//    dispatched as a group of `group_size` samples.
//  - Per-dataset bounds: a dataset's samples in flight never exceed its `max_in_flight`; among
//    the datasets that fit, the next prompt goes to the one furthest below its mixture weight
//    (smooth weighted round robin, ties in config order), so the mixture holds steady.
//  - Off-policy bound eta: group k (0-based, in dispatch order) lands in training step
//    k / groups_per_step; dispatch waits while that step would exceed the current policy
//    version + eta, i.e. it proceeds only if k < (version + eta + 1) * groups_per_step.
//    eta = 0 is synchronous batch rollout.
//  - Length-bias control (LengthBiasGate): a finished sample becomes releasable at its gate
//    time; a group is ready once all of its samples are released.
//  - Suspend/Resume (trainer gone): Dispatch() returns nothing while suspended.
//  - Reconfigure: mixture weights, per-dataset bounds and the dataset set change at once;
//    groups already dispatched keep their dataset and finish normally.
//
// Thread-safe: every method takes an internal mutex. The clock must outlive the controller.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/common/clock.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/length_bias_gate.h"

namespace flotilla::trainer_bridge {

// One prompt to start: `group_size` samples with ids first_sample .. first_sample + size - 1.
struct GroupTicket {
  uint64_t group = 0;          // dispatch index k (0-based)
  std::string dataset;
  uint64_t first_sample = 0;
  uint32_t size = 0;
  std::vector<uint32_t> efforts;  // per sample (0 when effort control is off)
  int64_t dispatch_version = 0;
};

struct ControllerStats {
  uint32_t in_flight = 0;
  uint32_t held = 0;               // finished, waiting on the length-bias gate
  uint32_t ready_groups = 0;
  uint64_t groups_dispatched = 0;
  uint64_t samples_finished = 0;
  uint64_t groups_consumed = 0;
  uint64_t groups_outstanding = 0;  // dispatched and not yet taken (in flight, held or ready)
  int64_t policy_version = 0;
  bool suspended = false;
  std::map<std::string, uint32_t> in_flight_by_dataset;
  std::map<std::string, uint64_t> groups_by_dataset;
};

class RolloutController {
 public:
  RolloutController(const RolloutConfig& rollout, const std::vector<DatasetConfig>& datasets,
                    const std::vector<uint32_t>& effort_levels, const Clock& clock);

  // Every group that may start now, in dispatch order (possibly none).
  std::vector<GroupTicket> Dispatch();
  // A sample finished generating; `length` is its generated token count.
  // NotFound for an unknown sample, FailedPrecondition when it already finished.
  absl::Status OnSampleFinished(uint64_t sample, uint32_t length);
  // Groups ready for training, oldest-ready first; they leave the controller (consumed).
  std::vector<uint64_t> TakeReadyGroups(size_t max_groups);
  // When the earliest held sample becomes releasable (nullopt: nothing held).
  [[nodiscard]] std::optional<int64_t> NextReleaseNanos() const;

  void SetPolicyVersion(int64_t version);
  void SetSuspended(bool suspended);
  absl::Status Reconfigure(const std::vector<DatasetConfig>& datasets);
  // After a restart, before the first Dispatch: dispatch indices continue from
  // `groups_dispatched`, and each listed dataset's count continues (so eta and the mixture
  // hold across restarts).
  void RestoreCounters(uint64_t groups_dispatched, const std::map<std::string, uint64_t>& by_dataset);
  // The run's trainer takes `groups` groups from this controller in all (its steps times the
  // groups per step, less those stored from before and handed over again): no group past
  // them is dispatched, so the run's end starts no sample nobody trains on. Counted from the
  // first group this controller dispatches (after RestoreCounters).
  void SetGroupBudget(uint64_t groups);
  // A trainer that waits for more groups than are outstanding once the budget is spent runs
  // more steps than the budget assumed: the bound goes (dispatch as if none was set).
  void LiftSpentGroupBudget();

  [[nodiscard]] ControllerStats Stats() const;
  [[nodiscard]] const RolloutConfig& config() const { return rollout_; }

 private:
  struct SampleState {
    uint64_t group = 0;
    std::string dataset;
    int64_t dispatch_nanos = 0;
    bool finished = false;
    int64_t release_nanos = 0;
  };
  struct GroupState {
    uint32_t size = 0;
    uint32_t finished = 0;
    std::vector<uint64_t> samples;
  };

  bool MayDispatchLocked(const std::string& dataset) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const DatasetConfig* PickDatasetLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PromoteReleasedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RolloutConfig rollout_;
  const std::vector<uint32_t> effort_levels_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  std::vector<DatasetConfig> datasets_ ABSL_GUARDED_BY(mu_);
  LengthBiasGate gate_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, SampleState> samples_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, GroupState> groups_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> ready_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> in_flight_by_dataset_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> groups_by_dataset_ ABSL_GUARDED_BY(mu_);
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_group_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t first_group_ ABSL_GUARDED_BY(mu_) = 0;  // next_group_ when this controller began
  uint64_t budget_end_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<uint64_t>::max();
  uint64_t next_sample_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t samples_finished_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t groups_consumed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace flotilla::trainer_bridge
