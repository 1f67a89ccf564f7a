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
  };
  return kMigrations;
}

struct WhereClause {
  std::string sql;
  std::vector<std::string> text_args;
  std::optional<int64_t> status;
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
  if (q.status.has_value()) {
    parts.push_back("status = ?");
    w.status = static_cast<int64_t>(*q.status);
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrajectoryStore>> TrajectoryStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto db, Database::Open(path));
  RETURN_IF_ERROR(Annotate(db->Migrate(Migrations()), absl::StrCat("trajectory store ", path)));
  return std::unique_ptr<TrajectoryStore>(new TrajectoryStore(std::move(db)));
}

absl::Status TrajectoryStore::Put(const v1::Trajectory& t) {
  if (t.id().empty()) return absl::InvalidArgumentError("trajectory.id: must not be empty");
  std::string body;
  if (!t.SerializeToString(&body)) return absl::InternalError("trajectory: serialization failed");
  ASSIGN_OR_RETURN(auto tx, db_->Begin());
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO trajectories(id, experiment, task, scaffold, status, reward, updated_unix_ms, body)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET experiment = excluded.experiment,"
      " task = excluded.task, scaffold = excluded.scaffold, status = excluded.status,"
      " reward = excluded.reward, updated_unix_ms = excluded.updated_unix_ms, body = excluded.body"));
  RETURN_IF_ERROR(st.Bind(1, t.id()));
  RETURN_IF_ERROR(st.Bind(2, t.experiment()));
  RETURN_IF_ERROR(st.Bind(3, t.task()));
  RETURN_IF_ERROR(st.Bind(4, t.scaffold()));
  RETURN_IF_ERROR(st.Bind(5, static_cast<int64_t>(t.status())));
  RETURN_IF_ERROR(st.Bind(6, t.reward()));
  RETURN_IF_ERROR(st.Bind(7, t.end_unix_ms() != 0 ? t.end_unix_ms() : t.start_unix_ms()));
  RETURN_IF_ERROR(st.BindBlob(8, body));
  RETURN_IF_ERROR(st.Run());
  return tx.Commit();
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

absl::Status TrajectoryStore::ForEach(const TrajectoryQuery& query,
                                      const std::function<absl::Status(const v1::Trajectory&)>& fn) {
  WhereClause w = Where(query);
  ASSIGN_OR_RETURN(auto st, db_->Prepare(absl::StrCat("SELECT id, body FROM trajectories", w.sql,
                                                      " ORDER BY seq")));
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
