#include "flotilla/common/sqlite.h"

#include <sqlite3.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla {
namespace {
absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = absl::StrCat("sqlite: ", std::string(what), ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::PermissionDeniedError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_ERROR:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}
}  // namespace

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}
Statement::Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = o.stmt_;
    o.stmt_ = nullptr;
  }
  return *this;
}

absl::Status Statement::Check(int rc, std::string_view what) const {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return SqliteError(db_, rc, what);
}

absl::Status Statement::Bind(int index, int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, index, value), "bind");
}
absl::Status Statement::Bind(int index, double value) {
  return Check(sqlite3_bind_double(stmt_, index, value), "bind");
}
absl::Status Statement::Bind(int index, std::string_view text) {
  return Check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                                 SQLITE_TRANSIENT),
               "bind");
}
absl::Status Statement::BindBlob(int index, std::string_view bytes) {
  return Check(sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()),
                                 SQLITE_TRANSIENT),
               "bind");
}
absl::Status Statement::BindNull(int index) { return Check(sqlite3_bind_null(stmt_, index), "bind"); }

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, absl::StrCat("step '", sqlite3_sql(stmt_), "'"));
}

absl::Status Statement::Run() {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Statement::ColumnText(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : "";
}
std::string Statement::ColumnBlob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : "";
}
bool Statement::ColumnIsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

Transaction::Transaction(Transaction&& o) noexcept
    : db_(o.db_), lock_(std::move(o.lock_)), done_(o.done_) {
  o.done_ = true;
}

Transaction::~Transaction() {
  if (!done_) (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  if (done_) return absl::FailedPreconditionError("transaction already finished");
  done_ = true;
  absl::Status s = db_->Exec("COMMIT");
  if (!s.ok()) (void)db_->Exec("ROLLBACK");
  return s;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const DatabaseOptions& options) {
  sqlite3* raw = nullptr;
  int flags = options.read_only ? SQLITE_OPEN_READONLY
                                : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_FULLMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteError(raw, rc, absl::StrCat("open ", path));
    sqlite3_close(raw);
    return s;
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  if (!options.read_only) {
    ASSIGN_OR_RETURN(std::string mode, db->JournalMode());
    if (mode != "wal") {
      // Two processes opening a new database at once both switch it to WAL; SQLite answers the
      // loser SQLITE_BUSY at once rather than wait (waiting could deadlock), so retry here,
      // within the busy timeout.
      absl::Status switched = db->Exec("PRAGMA journal_mode=WAL");
      for (int waited_ms = 0; absl::IsUnavailable(switched) && waited_ms < options.busy_timeout_ms; waited_ms += 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        switched = db->Exec("PRAGMA journal_mode=WAL");
      }
      RETURN_IF_ERROR(switched);
      ASSIGN_OR_RETURN(mode, db->JournalMode());
      if (mode != "wal") {
        return absl::FailedPreconditionError(absl::StrCat(path, ": cannot enable WAL (mode ", mode, ")"));
      }
    }
    RETURN_IF_ERROR(db->Exec(options.synchronous_full ? "PRAGMA synchronous=FULL"
                                                      : "PRAGMA synchronous=NORMAL"));
  }
  RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

absl::Status Database::Exec(std::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  absl::Status s = SqliteError(db_, rc, absl::StrCat("exec '", text.substr(0, 80), "'"));
  sqlite3_free(err);
  return s;
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db_, rc, absl::StrCat("prepare '", std::string(sql.substr(0, 80)), "'"));
  }
  return Statement(db_, stmt);
}

absl::StatusOr<Transaction> Database::Begin() {
  std::unique_lock<std::recursive_mutex> lock(tx_mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  return Transaction(this, std::move(lock));
}

absl::StatusOr<int64_t> Database::SchemaVersion() {
  RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)"));
  ASSIGN_OR_RETURN(Statement st, Prepare("SELECT MAX(version) FROM schema_version"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row || st.ColumnIsNull(0)) return 0;
  return st.ColumnInt(0);
}

absl::Status Database::Migrate(const std::vector<std::string>& migrations) {
  ASSIGN_OR_RETURN(int64_t version, SchemaVersion());
  if (version > static_cast<int64_t>(migrations.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": schema version ", version, " is newer than this program (", migrations.size(), ")"));
  }
  for (size_t v = static_cast<size_t>(version); v < migrations.size(); ++v) {
    ASSIGN_OR_RETURN(Transaction tx, Begin());
    RETURN_IF_ERROR(Annotate(Exec(migrations[v]), absl::StrCat("migration ", v + 1)));
    ASSIGN_OR_RETURN(Statement st, Prepare("INSERT INTO schema_version(version) VALUES(?)"));
    RETURN_IF_ERROR(st.Bind(1, static_cast<int64_t>(v + 1)));
    RETURN_IF_ERROR(st.Run());
    RETURN_IF_ERROR(tx.Commit());
  }
  return absl::OkStatus();
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

absl::StatusOr<std::string> Database::JournalMode() {
  ASSIGN_OR_RETURN(Statement st, Prepare("PRAGMA journal_mode"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::InternalError("PRAGMA journal_mode returned nothing");
  return st.ColumnText(0);
}

}  // namespace flotilla
