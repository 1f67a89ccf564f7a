#include "flotilla/worker/trajectory_store.h"

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "google/protobuf/util/json_util.h"

namespace flotilla::worker {
namespace {

const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> kMigrations = {
      "CREATE TABLE trajectories ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  id TEXT NOT NULL UNIQUE,"
      "  experiment TEXT NOT NULL,"
      "  task TEXT NOT NULL,"
      "  scaffold TEXT NOT NULL,"
      "  status INTEGER NOT NULL,"
      "  reward REAL NOT NULL,"
      "  updated_unix_ms INTEGER NOT NULL,"
      "  body BLOB NOT NULL);"
      "CREATE INDEX trajectories_experiment ON trajectories(experiment);"
      "CREATE INDEX trajectories_task ON trajectories(task);"
      "CREATE INDEX trajectories_status ON trajectories(status);",
      // RL groups (written whole), their consumption by a trainer, and experiment state.
      "ALTER TABLE trajectories ADD COLUMN group_id TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE trajectories ADD COLUMN dataset TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE trajectories ADD COLUMN consumed INTEGER NOT NULL DEFAULT 0;"
      "CREATE INDEX trajectories_group ON trajectories(experiment, group_id);"
      "CREATE INDEX trajectories_consumed ON trajectories(experiment, consumed, seq);"
      "CREATE TABLE experiment_state(experiment TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
      "  PRIMARY KEY(experiment, key));",
  };
  return kMigrations;
}

struct WhereClause {
  std::string sql;
  std::vector<std::string> text_args;
  std::optional<int64_t> status;
  std::optional<int64_t> consumed;
};

WhereClause Where(const TrajectoryQuery& q) {
  WhereClause w;
  std::vector<std::string> parts;
  if (!q.experiment.empty()) {
    parts.push_back("experiment = ?");
    w.text_args.push_back(q.experiment);
  }
  if (!q.task.empty()) {
    parts.push_back("task = ?");
    w.text_args.push_back(q.task);
  }
  if (!q.group_id.empty()) {
    parts.push_back("group_id = ?");
    w.text_args.push_back(q.group_id);
  }
  if (q.status.has_value()) {
    parts.push_back("status = ?");
    w.status = static_cast<int64_t>(*q.status);
  }
  if (q.consumed.has_value()) {
    parts.push_back("consumed = ?");
    w.consumed = *q.consumed ? 1 : 0;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StrAppend(&w.sql, i == 0 ? " WHERE " : " AND ", parts[i]);
  }
  return w;
}

absl::Status BindWhere(Statement& st, const WhereClause& w) {
  int index = 1;
  for (const std::string& a : w.text_args) RETURN_IF_ERROR(st.Bind(index++, a));
  if (w.status.has_value()) RETURN_IF_ERROR(st.Bind(index++, *w.status));
  if (w.consumed.has_value()) RETURN_IF_ERROR(st.Bind(index++, *w.consumed));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrajectoryStore>> TrajectoryStore::Open(const std::string& path,
                                                                        const DatabaseOptions& options) {
  ASSIGN_OR_RETURN(auto db, Database::Open(path, options));
  RETURN_IF_ERROR(Annotate(db->Migrate(Migrations()), absl::StrCat("trajectory store ", path)));
  return std::unique_ptr<TrajectoryStore>(new TrajectoryStore(std::move(db)));
}

absl::Status TrajectoryStore::Put(const v1::Trajectory& t) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  RETURN_IF_ERROR(PutInTransaction(t));
  return tx.Commit();
}

absl::Status TrajectoryStore::PutAll(const std::vector<v1::Trajectory>& trajectories) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  for (const v1::Trajectory& t : trajectories) RETURN_IF_ERROR(PutInTransaction(t));
  return tx.Commit();
}

absl::Status TrajectoryStore::PutInTransaction(const v1::Trajectory& t) {
  if (t.id().empty()) return absl::InvalidArgumentError("trajectory.id: must not be empty");
  std::string body;
  if (!t.SerializeToString(&body)) return absl::InternalError("trajectory: serialization failed");
  // A replaced trajectory keeps its place (seq) and whether a trainer consumed it.
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO trajectories(id, experiment, task, scaffold, status, reward, updated_unix_ms, body,"
      " group_id, dataset) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET"
      " experiment = excluded.experiment, task = excluded.task, scaffold = excluded.scaffold,"
      " status = excluded.status, reward = excluded.reward, updated_unix_ms = excluded.updated_unix_ms,"
      " body = excluded.body, group_id = excluded.group_id, dataset = excluded.dataset"));
  RETURN_IF_ERROR(st.Bind(1, t.id()));
  RETURN_IF_ERROR(st.Bind(2, t.experiment()));
  RETURN_IF_ERROR(st.Bind(3, t.task()));
  RETURN_IF_ERROR(st.Bind(4, t.scaffold()));
  RETURN_IF_ERROR(st.Bind(5, static_cast<int64_t>(t.status())));
  RETURN_IF_ERROR(st.Bind(6, t.reward()));
  RETURN_IF_ERROR(st.Bind(7, t.end_unix_ms() != 0 ? t.end_unix_ms() : t.start_unix_ms()));
  RETURN_IF_ERROR(st.BindBlob(8, body));
  RETURN_IF_ERROR(st.Bind(9, t.group_id()));
  RETURN_IF_ERROR(st.Bind(10, t.dataset()));
  return st.Run();
}

absl::Status TrajectoryStore::MarkConsumed(const std::string& experiment, const std::vector<std::string>& group_ids,
                                           const std::map<std::string, std::string>& state) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  ASSIGN_OR_RETURN(auto st,
                   db_->Prepare("UPDATE trajectories SET consumed = 1 WHERE experiment = ? AND group_id = ?"));
  for (const std::string& g : group_ids) {
    st.Reset();
    RETURN_IF_ERROR(st.Bind(1, experiment));
    RETURN_IF_ERROR(st.Bind(2, g));
    RETURN_IF_ERROR(st.Run());
  }
  RETURN_IF_ERROR(SetStateInTransaction(experiment, state));
  return tx.Commit();
}

absl::StatusOr<std::vector<std::string>> TrajectoryStore::UnconsumedGroups(const std::string& experiment) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT group_id FROM trajectories WHERE experiment = ? AND consumed = 0 AND group_id != ''"
      " GROUP BY group_id ORDER BY MIN(seq)"));
  RETURN_IF_ERROR(st.Bind(1, experiment));
  std::vector<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return out;
    out.push_back(st.ColumnText(0));
  }
}

absl::Status TrajectoryStore::SetState(const std::string& experiment, const std::map<std::string, std::string>& values) {
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  RETURN_IF_ERROR(SetStateInTransaction(experiment, values));
  return tx.Commit();
}

absl::Status TrajectoryStore::SetStateInTransaction(const std::string& experiment,
                                                    const std::map<std::string, std::string>& values) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT OR REPLACE INTO experiment_state(experiment, key, value) VALUES(?, ?, ?)"));
  for (const auto& [key, value] : values) {
    st.Reset();
    RETURN_IF_ERROR(st.Bind(1, experiment));
    RETURN_IF_ERROR(st.Bind(2, key));
    RETURN_IF_ERROR(st.Bind(3, value));
    RETURN_IF_ERROR(st.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TrajectoryStore::GetState(const std::string& experiment, const std::string& key,
                                                      const std::string& missing) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT value FROM experiment_state WHERE experiment = ? AND key = ?"));
  RETURN_IF_ERROR(st.Bind(1, experiment));
  RETURN_IF_ERROR(st.Bind(2, key));
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.ColumnText(0) : missing;
}

absl::StatusOr<v1::Trajectory> TrajectoryStore::Get(const std::string& id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT body FROM trajectories WHERE id = ?"));
  RETURN_IF_ERROR(st.Bind(1, id));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("trajectory '", id, "' not found"));
  v1::Trajectory t;
  if (!t.ParseFromString(st.ColumnBlob(0))) {
    return absl::DataLossError(absl::StrCat("trajectory '", id, "': stored body does not parse"));
  }
  return t;
}

absl::Status TrajectoryStore::Scan(const TrajectoryQuery& query, const std::string& order_and_limit,
                                   const std::function<absl::Status(const v1::Trajectory&)>& fn) {
  WhereClause w = Where(query);
  ASSIGN_OR_RETURN(auto st, db_->Prepare(absl::StrCat("SELECT id, body FROM trajectories", w.sql, " ", order_and_limit)));
  RETURN_IF_ERROR(BindWhere(st, w));
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::OkStatus();
    v1::Trajectory t;
    if (!t.ParseFromString(st.ColumnBlob(1))) {
      return absl::DataLossError(
          absl::StrCat("trajectory '", st.ColumnText(0), "': stored body does not parse"));
    }
    RETURN_IF_ERROR(fn(t));
  }
}

absl::Status TrajectoryStore::ForEach(const TrajectoryQuery& query,
                                      const std::function<absl::Status(const v1::Trajectory&)>& fn) {
  return Scan(query, "ORDER BY seq", fn);
}

absl::StatusOr<std::vector<v1::Trajectory>> TrajectoryStore::Newest(const TrajectoryQuery& query, int limit) {
  if (limit < 1) return absl::InvalidArgumentError(absl::StrCat("limit ", limit, ": must be at least 1"));
  std::vector<v1::Trajectory> out;
  RETURN_IF_ERROR(Scan(query, absl::StrCat("ORDER BY seq DESC LIMIT ", limit), [&](const v1::Trajectory& t) {
    out.push_back(t);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> TrajectoryStore::Count(const TrajectoryQuery& query) {
  WhereClause w = Where(query);
  ASSIGN_OR_RETURN(auto st, db_->Prepare(absl::StrCat("SELECT COUNT(*) FROM trajectories", w.sql)));
  RETURN_IF_ERROR(BindWhere(st, w));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::InternalError("COUNT returned no row");
  return st.ColumnInt(0);
}

absl::StatusOr<std::string> TrajectoryToJsonLine(const v1::Trajectory& trajectory) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(trajectory, &out, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("trajectory to JSON: ", std::string(status.message())));
  }
  return out;
}

}  // namespace flotilla::worker
