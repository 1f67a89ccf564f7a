#include "flotilla/trainer_bridge/experiment_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/worker/chat_types.h"
#include "flotilla/worker/token_span.h"

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

v1::Trajectory ExperimentStore::ToTrajectory(const RolloutSample& s, const std::string& experiment) {
  v1::Trajectory t;
  t.set_id(absl::StrCat(experiment, "/s", s.id));
  t.set_experiment(experiment);
  t.set_task(s.task_id);
  t.set_dataset(s.dataset);
  t.set_scaffold("single-turn");  // the only scaffold the rollout runs (experiment_config.cc)
  t.set_group_id(GroupId(s.group));
  t.set_effort(s.effort);
  t.set_reward(s.reward);
  t.set_status(s.failed ? v1::FAILED : v1::OK);
  t.set_detail(s.detail);
  (*t.mutable_metrics())["dispatch_version"] = static_cast<double>(s.dispatch_version);
  (*t.mutable_metrics())["segments"] = s.segments;
  v1::Segment* seg = t.add_segments();
  seg->set_reason("start");
  v1::Turn* prompt = seg->add_turns();
  prompt->set_role(v1::Turn::USER);
  // Turn text is for people (a proto string must be UTF-8); the token ids stay exact.
  prompt->set_text(worker::SanitizeUtf8(inference::Decode(s.prompt, /*skip_special=*/true)));
  worker::AppendContextTokens(prompt->mutable_tokens(), s.prompt);
  v1::Turn* reply = seg->add_turns();
  reply->set_role(v1::Turn::ASSISTANT);
  reply->set_text(worker::SanitizeUtf8(inference::Decode(s.completion, /*skip_special=*/false)));
  v1::TokenSpan* span = reply->mutable_tokens();
  span->set_experts_per_token(s.routing_width);
  const size_t width = s.routing_width;
  for (size_t i = 0; i < s.completion.size(); ++i) {
    worker::AppendGeneratedToken(span, s.completion[i], s.logprobs[i], s.versions[i],
                                 absl::Span<const int32_t>(s.routing).subspan(i * width, width));
  }
  return t;
}

absl::StatusOr<RolloutSample> ExperimentStore::FromTrajectory(const v1::Trajectory& t) {
  RolloutSample s;
  const size_t sample_at = t.id().rfind("/s");
  if (t.segments_size() != 1 || t.segments(0).turns_size() != 2 || sample_at == std::string::npos ||
      !absl::SimpleAtoi(t.id().substr(sample_at + 2), &s.id) || t.group_id().empty() ||
      !absl::SimpleAtoi(t.group_id().substr(1), &s.group)) {
    return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "' is not a rollout sample record"));
  }
  s.task_id = t.task();
  s.dataset = t.dataset();
  s.effort = t.effort();
  s.reward = t.reward();
  s.failed = t.status() != v1::OK;
  s.detail = t.detail();
  auto m = t.metrics().find("dispatch_version");
  if (m != t.metrics().end()) s.dispatch_version = static_cast<int64_t>(m->second);
  auto sg = t.metrics().find("segments");
  if (sg != t.metrics().end()) s.segments = static_cast<uint32_t>(sg->second);
  const v1::TokenSpan& p = t.segments(0).turns(0).tokens();
  s.prompt.assign(p.ids().begin(), p.ids().end());
  const v1::TokenSpan& r = t.segments(0).turns(1).tokens();
  s.completion.assign(r.ids().begin(), r.ids().end());
  s.loss_mask.assign(r.loss_mask().begin(), r.loss_mask().end());
  s.logprobs.assign(r.logprobs().begin(), r.logprobs().end());
  s.versions.assign(r.policy_versions().begin(), r.policy_versions().end());
  s.routing.assign(r.experts().begin(), r.experts().end());
  s.routing_width = r.experts_per_token();
  // Records of this store hold one generated reply (ToTrajectory), so every routing row is there.
  if (s.loss_mask.size() != s.completion.size() || s.logprobs.size() != s.completion.size() ||
      s.versions.size() != s.completion.size() ||
      s.routing.size() != s.completion.size() * s.routing_width) {
    return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "': token arrays disagree in length"));
  }
  return s;
}


absl::Status ExperimentStore::PutGroup(const std::vector<RolloutSample>& group) {
  std::vector<v1::Trajectory> records;
  records.reserve(group.size());
  for (const RolloutSample& s : group) records.push_back(ToTrajectory(s, experiment_));
  return store_->PutAll(records);
}

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
    out.push_back(t.status() == v1::OK ? t.reward() : 0.0);
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace flotilla::trainer_bridge
