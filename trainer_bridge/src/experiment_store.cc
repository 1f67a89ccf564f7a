#include "flotilla/trainer_bridge/experiment_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"

namespace flotilla::trainer_bridge {
namespace {

std::string GroupId(uint64_t group) { return absl::StrCat("g", group); }

}  // namespace

absl::StatusOr<std::unique_ptr<ExperimentStore>> ExperimentStore::Open(const std::string& path,
                                                                        const std::string& experiment) {
  DatabaseOptions opts;
  opts.synchronous_full = false;  // WAL + NORMAL survives kill -9 of the process
  ASSIGN_OR_RETURN(auto store, worker::TrajectoryStore::Open(path, opts));
  auto out = std::make_unique<ExperimentStore>(store.get(), experiment);
  out->owned_ = std::move(store);
  return out;
}

ExperimentStore::ExperimentStore(worker::TrajectoryStore* store, std::string experiment)
    : store_(store), experiment_(std::move(experiment)) {}

absl::StatusOr<RolloutSample> ExperimentStore::FromTrajectory(const v1::Trajectory& t) {
  RolloutSample s;
  // "<experiment>/s<sample>", or "<experiment as a safe id>.s<sample>" (an agent CLI's session).
  auto sample_of = [&t, &s](const char* sep) {
    const size_t at = t.id().rfind(sep);
    return at != std::string::npos && absl::SimpleAtoi(t.id().substr(at + 2), &s.id);
  };
  if (!(sample_of("/s") || sample_of(".s")) ||
      (!t.group_id().empty() && !absl::SimpleAtoi(t.group_id().substr(1), &s.group))) {
    return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "' is not a rollout sample record"));
  }
  s.task_id = t.task();
  s.dataset = t.dataset();
  s.effort = t.effort();
  s.reward = t.reward();
  s.failed = t.status() != v1::OK && t.status() != v1::TIMED_OUT;
  s.detail = t.detail();
  auto metric = [&t](const char* k) {
    auto m = t.metrics().find(k);
    return m == t.metrics().end() ? 0.0 : m->second;
  };
  s.dispatch_version = static_cast<int64_t>(metric("dispatch_version"));
  s.turns = static_cast<uint32_t>(metric("turns"));
  s.tool_calls = static_cast<uint32_t>(metric("tool_calls"));
  s.sandbox_ms = metric("sandbox_create_ms") + metric("sandbox_destroy_ms");
  if (t.segments_size() == 0) return s;  // nothing ran (the sandbox could not be created)
  // The last segment is the whole final context: a segment opened by a history rewrite starts
  // with the recorded ids of the turns it kept.
  const v1::Segment& seg = t.segments(t.segments_size() - 1);
  for (const v1::Turn& turn : seg.turns()) {
    const v1::TokenSpan& span = turn.tokens();
    if (span.loss_mask_size() != span.ids_size() || span.logprobs_size() != span.ids_size() ||
        span.policy_versions_size() != span.ids_size()) {
      return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "': token arrays disagree in length"));
    }
    s.turn_starts.push_back(static_cast<uint32_t>(s.prompt.size() + s.completion.size()));
    int generated = 0;
    for (uint32_t m : span.loss_mask()) generated += m != 0 ? 1 : 0;
    if (generated > 0 && span.experts_size() % generated != 0) {
      return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "': ", span.experts_size(),
                                              " expert ids for ", generated, " generated tokens"));
    }
    const uint32_t width = generated > 0 ? static_cast<uint32_t>(span.experts_size() / generated) : 0;
    int expert_at = 0;
    for (int i = 0; i < span.ids_size(); ++i) {
      if (span.loss_mask(i) == 0) {
        if (s.completion.empty()) {
          s.prompt.push_back(span.ids(i));
        } else {
          s.AppendContext({span.ids(i)});
        }
        continue;
      }
      inference::TokenRecord r;
      r.token = span.ids(i);
      r.logprob = span.logprobs(i);
      r.policy_version = span.policy_versions(i);
      r.experts.assign(span.experts().begin() + expert_at, span.experts().begin() + expert_at + width);
      expert_at += static_cast<int>(width);
      RETURN_IF_ERROR(Annotate(s.Append({r}), absl::StrCat("trajectory '", t.id(), "'")));
    }
  }
  return s;
}

absl::Status ExperimentStore::PutGroup(const std::vector<v1::Trajectory>& group) { return store_->PutAll(group); }

absl::Status ExperimentStore::MarkConsumed(const std::vector<uint64_t>& groups, int64_t step) {
  std::vector<std::string> ids;
  ids.reserve(groups.size());
  for (uint64_t g : groups) ids.push_back(GroupId(g));
  return store_->MarkConsumed(experiment_, ids, {{"step", absl::StrCat(step)}});
}

absl::StatusOr<std::vector<RolloutSample>> ExperimentStore::LoadGroup(uint64_t group) {
  worker::TrajectoryQuery q;
  q.experiment = experiment_;
  q.group_id = GroupId(group);
  std::vector<RolloutSample> out;
  RETURN_IF_ERROR(store_->ForEach(q, [&out](const v1::Trajectory& t) -> absl::Status {
    ASSIGN_OR_RETURN(RolloutSample s, FromTrajectory(t));
    out.push_back(std::move(s));
    return absl::OkStatus();
  }));
  std::sort(out.begin(), out.end(), [](const RolloutSample& a, const RolloutSample& b) { return a.id < b.id; });
  return out;
}

absl::StatusOr<std::vector<std::vector<RolloutSample>>> ExperimentStore::LoadUnconsumed() {
  ASSIGN_OR_RETURN(std::vector<std::string> groups, store_->UnconsumedGroups(experiment_));
  std::vector<std::vector<RolloutSample>> out;
  for (const std::string& g : groups) {
    uint64_t group = 0;
    if (!absl::SimpleAtoi(absl::string_view(g).substr(1), &group)) {
      return absl::DataLossError(absl::StrCat("experiment '", experiment_, "': group id '", g, "' is not g<N>"));
    }
    ASSIGN_OR_RETURN(auto samples, LoadGroup(group));
    out.push_back(std::move(samples));
  }
  return out;
}

absl::Status ExperimentStore::SaveCounters(uint64_t groups_dispatched,
                                           const std::map<std::string, uint64_t>& by_dataset) {
  std::string enc;
  for (const auto& [d, n] : by_dataset) absl::StrAppend(&enc, enc.empty() ? "" : ",", d, "=", n);
  return store_->SetState(experiment_, {{"groups_dispatched", absl::StrCat(groups_dispatched)},
                                        {"groups_by_dataset", enc}});
}

absl::Status ExperimentStore::SavePolicy(int64_t version, const std::string& weights_path) {
  return store_->SetState(experiment_, {{"policy_version", absl::StrCat(version)}, {"weights_path", weights_path}});
}

absl::StatusOr<StoredState> ExperimentStore::LoadState() {
  StoredState s;
  ASSIGN_OR_RETURN(std::string gd, store_->GetState(experiment_, "groups_dispatched", "0"));
  ASSIGN_OR_RETURN(std::string by, store_->GetState(experiment_, "groups_by_dataset", ""));
  ASSIGN_OR_RETURN(std::string pv, store_->GetState(experiment_, "policy_version", "0"));
  ASSIGN_OR_RETURN(s.weights_path, store_->GetState(experiment_, "weights_path", ""));
  ASSIGN_OR_RETURN(std::string step, store_->GetState(experiment_, "step", "0"));
  if (!absl::SimpleAtoi(gd, &s.groups_dispatched) || !absl::SimpleAtoi(pv, &s.policy_version) ||
      !absl::SimpleAtoi(step, &s.step)) {
    return absl::DataLossError(absl::StrCat("experiment '", experiment_, "': stored counters do not parse"));
  }
  for (absl::string_view kv : absl::StrSplit(by, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    uint64_t n = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &n)) {
      return absl::DataLossError(absl::StrCat("experiment '", experiment_, "': bad groups_by_dataset '", by, "'"));
    }
    s.groups_by_dataset[parts[0]] = n;
  }
  // Completed groups prove at least that many were dispatched, even if counters lagged.
  worker::TrajectoryQuery q;
  q.experiment = experiment_;
  RETURN_IF_ERROR(store_->ForEach(q, [&s](const v1::Trajectory& t) -> absl::Status {
    uint64_t group = 0;
    if (!t.group_id().empty() && absl::SimpleAtoi(absl::string_view(t.group_id()).substr(1), &group)) {
      s.groups_dispatched = std::max<uint64_t>(s.groups_dispatched, group + 1);
    }
    return absl::OkStatus();
  }));
  return s;
}

absl::Status ExperimentStore::SetFinished(bool finished) {
  return store_->SetState(experiment_, {{"finished", finished ? "1" : "0"}});
}

absl::StatusOr<bool> ExperimentStore::Finished() {
  // Not ASSIGN_OR_RETURN into a string: GCC 12 then warns of a maybe-uninitialized compare.
  auto v = store_->GetState(experiment_, "finished", "0");
  if (!v.ok()) return v.status();
  return *v == std::string("1");
}

absl::StatusOr<EpisodeFigures> ExperimentStore::Figures() {
  worker::TrajectoryQuery q;
  q.experiment = experiment_;
  EpisodeFigures f;
  double turns = 0, calls = 0;
  RETURN_IF_ERROR(store_->ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
    if (t.group_id().empty()) return absl::OkStatus();
    f.samples += 1;
    f.failed += t.status() != v1::OK && t.status() != v1::TIMED_OUT ? 1 : 0;
    f.sandboxes += t.sandbox_id().empty() ? 0 : 1;
    auto m = t.metrics().find("turns");
    turns += m == t.metrics().end() ? 0 : m->second;
    m = t.metrics().find("tool_calls");
    calls += m == t.metrics().end() ? 0 : m->second;
    return absl::OkStatus();
  }));
  if (f.samples > 0) {
    f.turns_mean = turns / static_cast<double>(f.samples);
    f.tool_calls_mean = calls / static_cast<double>(f.samples);
  }
  return f;
}

absl::StatusOr<int64_t> ExperimentStore::CountTrajectories() {
  worker::TrajectoryQuery q;
  q.experiment = experiment_;
  return store_->Count(q);
}

absl::StatusOr<std::vector<double>> ExperimentStore::Rewards() {
  worker::TrajectoryQuery q;
  q.experiment = experiment_;
  std::vector<double> out;
  RETURN_IF_ERROR(store_->ForEach(q, [&out](const v1::Trajectory& t) -> absl::Status {
    if (!t.group_id().empty()) out.push_back(t.reward());  // episodes still running have no group yet
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace flotilla::trainer_bridge
