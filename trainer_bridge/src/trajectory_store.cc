#include "flotilla/trainer_bridge/trajectory_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/tokenizer.h"

namespace flotilla::trainer_bridge {
namespace {

// Turn text is a proto string (UTF-8): bytes that do not form valid UTF-8 become U+FFFD. The
// token ids stay exact; the text is only for people reading trajectories.
std::string ValidUtf8(const std::string& in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= in.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(in, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += 1;
    }
  }
  return out;
}

const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> m = {
      "CREATE TABLE trajectories(id TEXT PRIMARY KEY, sample INTEGER NOT NULL, group_id INTEGER NOT NULL, "
      "dataset TEXT NOT NULL, reward REAL NOT NULL, record BLOB NOT NULL, consumed INTEGER NOT NULL DEFAULT 0, "
      "seq INTEGER NOT NULL);"
      "CREATE INDEX trajectories_group ON trajectories(group_id);"
      "CREATE INDEX trajectories_consumed ON trajectories(consumed, seq);"
      "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
  };
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrajectoryStore>> TrajectoryStore::Open(const std::string& path,
                                                                        const std::string& experiment) {
  DatabaseOptions opts;
  opts.synchronous_full = false;  // WAL + NORMAL survives kill -9 of the process
  ASSIGN_OR_RETURN(auto db, Database::Open(path, opts));
  RETURN_IF_ERROR(Annotate(db->Migrate(Migrations()), "trajectory store " + path));
  return std::unique_ptr<TrajectoryStore>(new TrajectoryStore(std::move(db), experiment));
}

v1::Trajectory TrajectoryStore::ToTrajectory(const RolloutSample& s, const std::string& experiment) {
  v1::Trajectory t;
  t.set_id(absl::StrCat("s", s.id));
  t.set_experiment(experiment);
  t.set_task(s.task_id);
  t.set_dataset(s.dataset);
  t.set_scaffold("single-turn");
  t.set_group_id(absl::StrCat("g", s.group));
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
  prompt->set_text(ValidUtf8(inference::Decode(s.prompt, /*skip_special=*/true)));
  for (int32_t id : s.prompt) {
    prompt->mutable_tokens()->add_ids(id);
    prompt->mutable_tokens()->add_loss_mask(0);
    prompt->mutable_tokens()->add_logprobs(0);
    prompt->mutable_tokens()->add_policy_versions(-1);
  }
  v1::Turn* reply = seg->add_turns();
  reply->set_role(v1::Turn::ASSISTANT);
  reply->set_text(ValidUtf8(inference::Decode(s.completion, /*skip_special=*/false)));
  v1::TokenSpan* span = reply->mutable_tokens();
  span->set_experts_per_token(s.routing_width);
  for (size_t i = 0; i < s.completion.size(); ++i) {
    span->add_ids(s.completion[i]);
    span->add_loss_mask(1);
    span->add_logprobs(s.logprobs[i]);
    span->add_policy_versions(s.versions[i]);
  }
  span->mutable_experts()->Add(s.routing.begin(), s.routing.end());
  return t;
}

absl::StatusOr<RolloutSample> TrajectoryStore::FromTrajectory(const v1::Trajectory& t) {
  RolloutSample s;
  if (t.segments_size() != 1 || t.segments(0).turns_size() != 2 ||
      !absl::SimpleAtoi(t.id().substr(1), &s.id) || !absl::SimpleAtoi(t.group_id().substr(1), &s.group)) {
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
  s.logprobs.assign(r.logprobs().begin(), r.logprobs().end());
  s.versions.assign(r.policy_versions().begin(), r.policy_versions().end());
  s.routing.assign(r.experts().begin(), r.experts().end());
  s.routing_width = r.experts_per_token();
  if (s.logprobs.size() != s.completion.size() || s.versions.size() != s.completion.size() ||
      s.routing.size() != s.completion.size() * s.routing_width) {
    return absl::DataLossError(absl::StrCat("trajectory '", t.id(), "': token arrays disagree in length"));
  }
  return s;
}

absl::Status TrajectoryStore::PutGroup(const std::vector<RolloutSample>& group) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  ASSIGN_OR_RETURN(auto seq_st, db_->Prepare("SELECT COALESCE(MAX(seq), 0) FROM trajectories"));
  ASSIGN_OR_RETURN(bool row, seq_st.Step());
  int64_t seq = row ? seq_st.ColumnInt(0) : 0;
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT OR REPLACE INTO trajectories(id, sample, group_id, dataset, reward, record, consumed, seq) "
      "VALUES(?, ?, ?, ?, ?, ?, 0, ?)"));
  for (const RolloutSample& s : group) {
    v1::Trajectory t = ToTrajectory(s, experiment_);
    std::string blob;
    if (!t.SerializeToString(&blob)) return absl::InternalError("trajectory does not serialise");
    st.Reset();
    RETURN_IF_ERROR(st.Bind(1, t.id()));
    RETURN_IF_ERROR(st.Bind(2, static_cast<int64_t>(s.id)));
    RETURN_IF_ERROR(st.Bind(3, static_cast<int64_t>(s.group)));
    RETURN_IF_ERROR(st.Bind(4, s.dataset));
    RETURN_IF_ERROR(st.Bind(5, s.failed ? 0.0 : s.reward));
    RETURN_IF_ERROR(st.BindBlob(6, blob));
    RETURN_IF_ERROR(st.Bind(7, ++seq));
    RETURN_IF_ERROR(st.Run());
  }
  return tx.Commit();
}

absl::Status TrajectoryStore::MarkConsumed(const std::vector<uint64_t>& groups, int64_t step) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  ASSIGN_OR_RETURN(auto st, db_->Prepare("UPDATE trajectories SET consumed = 1 WHERE group_id = ?"));
  for (uint64_t g : groups) {
    st.Reset();
    RETURN_IF_ERROR(st.Bind(1, static_cast<int64_t>(g)));
    RETURN_IF_ERROR(st.Run());
  }
  RETURN_IF_ERROR(SetMeta("step", absl::StrCat(step)));
  return tx.Commit();
}

absl::StatusOr<std::vector<RolloutSample>> TrajectoryStore::LoadGroup(uint64_t group) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT record FROM trajectories WHERE group_id = ? ORDER BY sample"));
  RETURN_IF_ERROR(st.Bind(1, static_cast<int64_t>(group)));
  std::vector<RolloutSample> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    v1::Trajectory t;
    if (!t.ParseFromString(st.ColumnBlob(0))) return absl::DataLossError("stored trajectory does not parse");
    ASSIGN_OR_RETURN(RolloutSample s, FromTrajectory(t));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<RolloutSample>>> TrajectoryStore::LoadUnconsumed() {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT group_id FROM trajectories WHERE consumed = 0 GROUP BY group_id ORDER BY MIN(seq)"));
  std::vector<uint64_t> groups;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    groups.push_back(static_cast<uint64_t>(st.ColumnInt(0)));
  }
  std::vector<std::vector<RolloutSample>> out;
  for (uint64_t g : groups) {
    ASSIGN_OR_RETURN(auto samples, LoadGroup(g));
    out.push_back(std::move(samples));
  }
  return out;
}

absl::Status TrajectoryStore::SetMeta(const std::string& key, const std::string& value) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  RETURN_IF_ERROR(st.Bind(1, key));
  RETURN_IF_ERROR(st.Bind(2, value));
  return st.Run();
}

absl::StatusOr<std::string> TrajectoryStore::GetMeta(const std::string& key, const std::string& dflt) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT value FROM meta WHERE key = ?"));
  RETURN_IF_ERROR(st.Bind(1, key));
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.ColumnText(0) : dflt;
}

absl::Status TrajectoryStore::SaveCounters(uint64_t groups_dispatched,
                                           const std::map<std::string, uint64_t>& by_dataset) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  RETURN_IF_ERROR(SetMeta("groups_dispatched", absl::StrCat(groups_dispatched)));
  std::string enc;
  for (const auto& [d, n] : by_dataset) absl::StrAppend(&enc, enc.empty() ? "" : ",", d, "=", n);
  RETURN_IF_ERROR(SetMeta("groups_by_dataset", enc));
  return tx.Commit();
}

absl::Status TrajectoryStore::SavePolicy(int64_t version, const std::string& weights_path) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  RETURN_IF_ERROR(SetMeta("policy_version", absl::StrCat(version)));
  RETURN_IF_ERROR(SetMeta("weights_path", weights_path));
  return tx.Commit();
}

absl::StatusOr<StoredState> TrajectoryStore::LoadState() {
  StoredState s;
  ASSIGN_OR_RETURN(std::string gd, GetMeta("groups_dispatched", "0"));
  ASSIGN_OR_RETURN(std::string by, GetMeta("groups_by_dataset", ""));
  ASSIGN_OR_RETURN(std::string pv, GetMeta("policy_version", "0"));
  ASSIGN_OR_RETURN(s.weights_path, GetMeta("weights_path", ""));
  ASSIGN_OR_RETURN(std::string step, GetMeta("step", "0"));
  if (!absl::SimpleAtoi(gd, &s.groups_dispatched) || !absl::SimpleAtoi(pv, &s.policy_version) ||
      !absl::SimpleAtoi(step, &s.step)) {
    return absl::DataLossError("trajectory store: meta counters do not parse");
  }
  for (absl::string_view kv : absl::StrSplit(by, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    uint64_t n = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &n)) return absl::DataLossError("bad groups_by_dataset");
    s.groups_by_dataset[parts[0]] = n;
  }
  // Completed groups prove at least that many were dispatched, even if counters lagged.
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT COALESCE(MAX(group_id) + 1, 0) FROM trajectories"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (row) s.groups_dispatched = std::max<uint64_t>(s.groups_dispatched, static_cast<uint64_t>(st.ColumnInt(0)));
  return s;
}

absl::Status TrajectoryStore::SetFinished(bool finished) { return SetMeta("finished", finished ? "1" : "0"); }

absl::StatusOr<bool> TrajectoryStore::Finished() {
  auto v = GetMeta("finished", "0");
  if (!v.ok()) return v.status();
  return *v == std::string("1");
}

absl::StatusOr<int64_t> TrajectoryStore::CountTrajectories() {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT COUNT(*) FROM trajectories"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.ColumnInt(0) : 0;
}

absl::StatusOr<std::vector<double>> TrajectoryStore::Rewards() {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT reward FROM trajectories ORDER BY seq"));
  std::vector<double> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.ColumnDouble(0));
  }
  return out;
}

}  // namespace flotilla::trainer_bridge
