#include "flotilla/trainer_bridge/rollout_controller.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace flotilla::trainer_bridge {

RolloutController::RolloutController(const RolloutConfig& rollout, const std::vector<DatasetConfig>& datasets,
                                     const std::vector<uint32_t>& effort_levels, const Clock& clock)
    : rollout_(rollout), effort_levels_(effort_levels), clock_(clock), datasets_(datasets),
      gate_(rollout.length_bias) {}

bool RolloutController::MayDispatchLocked(const std::string& dataset) const {
  for (const auto& d : datasets_) {
    if (d.name != dataset) continue;
    if (d.max_in_flight == 0) return true;
    auto it = in_flight_by_dataset_.find(dataset);
    uint32_t now = it == in_flight_by_dataset_.end() ? 0 : it->second;
    return now + rollout_.group_size <= d.max_in_flight;
  }
  return false;
}

const DatasetConfig* RolloutController::PickDatasetLocked() const {
  const DatasetConfig* best = nullptr;
  double best_score = std::numeric_limits<double>::infinity();
  for (const auto& d : datasets_) {
    if (!MayDispatchLocked(d.name)) continue;
    auto it = groups_by_dataset_.find(d.name);
    double done = it == groups_by_dataset_.end() ? 0.0 : static_cast<double>(it->second);
    double score = (done + 1.0) / d.weight;
    if (score < best_score) {
      best_score = score;
      best = &d;
    }
  }
  return best;
}

std::vector<GroupTicket> RolloutController::Dispatch() {
  absl::MutexLock lock(&mu_);
  std::vector<GroupTicket> out;
  while (!suspended_) {
    if (in_flight_ + rollout_.group_size > rollout_.max_in_flight) break;
    uint64_t limit = static_cast<uint64_t>(version_ + rollout_.staleness + 1) * rollout_.groups_per_step;
    if (next_group_ >= limit || next_group_ >= budget_end_) break;
    const DatasetConfig* ds = PickDatasetLocked();
    if (ds == nullptr) break;
    GroupTicket t;
    t.group = next_group_++;
    t.dataset = ds->name;
    t.first_sample = next_sample_;
    t.size = rollout_.group_size;
    t.dispatch_version = version_;
    GroupState g;
    g.size = t.size;
    int64_t now = clock_.NowNanos();
    for (uint32_t i = 0; i < t.size; ++i) {
      uint64_t id = next_sample_++;
      samples_[id] = SampleState{t.group, ds->name, now, false, 0};
      g.samples.push_back(id);
      // Effort levels cycle within a group so every subgroup has members to centre against.
      t.efforts.push_back(effort_levels_.empty() ? 0 : effort_levels_[i % effort_levels_.size()]);
    }
    groups_[t.group] = std::move(g);
    in_flight_ += t.size;
    in_flight_by_dataset_[ds->name] += t.size;
    groups_by_dataset_[ds->name] += 1;
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status RolloutController::OnSampleFinished(uint64_t sample, uint32_t length) {
  absl::MutexLock lock(&mu_);
  auto it = samples_.find(sample);
  if (it == samples_.end()) return absl::NotFoundError(absl::StrCat("sample ", sample, " is unknown"));
  SampleState& s = it->second;
  if (s.finished) return absl::FailedPreconditionError(absl::StrCat("sample ", sample, " already finished"));
  s.finished = true;
  int64_t now = clock_.NowNanos();
  s.release_nanos = gate_.OnFinished(s.dataset, length, s.dispatch_nanos, now);
  in_flight_ -= 1;
  in_flight_by_dataset_[s.dataset] -= 1;
  samples_finished_ += 1;
  groups_[s.group].finished += 1;
  return absl::OkStatus();
}

void RolloutController::PromoteReleasedLocked() {
  int64_t now = clock_.NowNanos();
  // Groups become ready in the order their last sample is released; stable by group index.
  std::vector<std::pair<int64_t, uint64_t>> newly;
  for (auto& [gid, g] : groups_) {
    if (g.finished < g.size) continue;
    int64_t release = 0;
    for (uint64_t s : g.samples) release = std::max(release, samples_[s].release_nanos);
    if (release <= now) newly.emplace_back(release, gid);
  }
  std::sort(newly.begin(), newly.end());
  for (const auto& [release, gid] : newly) {
    for (uint64_t s : groups_[gid].samples) samples_.erase(s);
    groups_.erase(gid);
    ready_.push_back(gid);
  }
}

std::vector<uint64_t> RolloutController::TakeReadyGroups(size_t max_groups) {
  absl::MutexLock lock(&mu_);
  PromoteReleasedLocked();
  size_t n = std::min(max_groups, ready_.size());
  std::vector<uint64_t> out(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(n));
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(n));
  groups_consumed_ += n;
  return out;
}

std::optional<int64_t> RolloutController::NextReleaseNanos() const {
  absl::MutexLock lock(&mu_);
  std::optional<int64_t> best;
  for (const auto& [gid, g] : groups_) {
    if (g.finished < g.size) continue;
    int64_t release = 0;
    for (uint64_t s : g.samples) release = std::max(release, samples_.at(s).release_nanos);
    if (!best || release < *best) best = release;
  }
  return best;
}

void RolloutController::SetPolicyVersion(int64_t version) {
  absl::MutexLock lock(&mu_);
  version_ = std::max(version_, version);
}

void RolloutController::SetSuspended(bool suspended) {
  absl::MutexLock lock(&mu_);
  suspended_ = suspended;
}

absl::Status RolloutController::Reconfigure(const std::vector<DatasetConfig>& datasets) {
  if (datasets.empty()) return absl::InvalidArgumentError("datasets: at least one dataset is required");
  for (size_t i = 0; i < datasets.size(); ++i) {
    if (!(datasets[i].weight > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("datasets[", i, "].weight: must be > 0"));
    }
    if (datasets[i].max_in_flight != 0 && datasets[i].max_in_flight < rollout_.group_size) {
      return absl::InvalidArgumentError(absl::StrCat("datasets[", i, "].max_in_flight: must be 0 or >= group_size (",
                                                     rollout_.group_size, ")"));
    }
  }
  absl::MutexLock lock(&mu_);
  datasets_ = datasets;
  return absl::OkStatus();
}

void RolloutController::RestoreCounters(uint64_t groups_dispatched,
                                        const std::map<std::string, uint64_t>& by_dataset) {
  absl::MutexLock lock(&mu_);
  next_group_ = std::max(next_group_, groups_dispatched);
  first_group_ = next_group_;  // called before the first Dispatch
  next_sample_ = std::max(next_sample_, groups_dispatched * rollout_.group_size);
  for (const auto& [d, n] : by_dataset) groups_by_dataset_[d] = std::max(groups_by_dataset_[d], n);
}

void RolloutController::SetGroupBudget(uint64_t groups) {
  absl::MutexLock lock(&mu_);
  budget_end_ = first_group_ + groups;
}

void RolloutController::LiftSpentGroupBudget() {
  absl::MutexLock lock(&mu_);
  if (next_group_ >= budget_end_) budget_end_ = std::numeric_limits<uint64_t>::max();
}

ControllerStats RolloutController::Stats() const {
  absl::MutexLock lock(&mu_);
  ControllerStats s;
  s.in_flight = in_flight_;
  for (const auto& [gid, g] : groups_) {
    for (uint64_t id : g.samples) s.held += samples_.at(id).finished ? 1 : 0;
  }
  s.ready_groups = static_cast<uint32_t>(ready_.size());
  s.groups_dispatched = next_group_;
  s.samples_finished = samples_finished_;
  s.groups_consumed = groups_consumed_;
  s.groups_outstanding = groups_.size() + ready_.size();
  s.policy_version = version_;
  s.suspended = suspended_;
  s.in_flight_by_dataset = in_flight_by_dataset_;
  s.groups_by_dataset = groups_by_dataset_;
  return s;
}

}  // namespace flotilla::trainer_bridge
