// A small RAII wrapper over SQLite used by every durable store.
//
//   ASSIGN_OR_RETURN(auto db, Database::Open(path));          // WAL, synchronous=FULL
//   RETURN_IF_ERROR(db->Migrate({"CREATE TABLE t(a INTEGER)", "ALTER TABLE t ADD b TEXT"}));
//   ASSIGN_OR_RETURN(auto tx, db->Begin());
//   ASSIGN_OR_RETURN(auto st, db->Prepare("INSERT INTO t(a, b) VALUES(?, ?)"));
//   RETURN_IF_ERROR(st.Bind(1, 42)); RETURN_IF_ERROR(st.Bind(2, "x")); RETURN_IF_ERROR(st.Run());
//   RETURN_IF_ERROR(tx.Commit());                             // rolled back if never committed
//
// Thread-safety: a Database may be used from several threads (SQLite serialized mode, and
// Begin() holds a per-database mutex for the transaction's life so transactions never
// interleave). A Statement belongs to one thread at a time. Statements and transactions must
// not outlive their Database.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace flotilla {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite.
  absl::Status Bind(int index, int64_t value);
  absl::Status Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  absl::Status Bind(int index, double value);
  absl::Status Bind(int index, std::string_view text);
  absl::Status Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  absl::Status BindBlob(int index, std::string_view bytes);
  absl::Status BindNull(int index);

  // Advances: true when a row is available, false when done.
  [[nodiscard]] absl::StatusOr<bool> Step();
  // Steps to completion, for statements that return no rows.
  absl::Status Run();
  // Clears bindings and rewinds so the statement can run again.
  void Reset();

  [[nodiscard]] int64_t ColumnInt(int col) const;
  [[nodiscard]] double ColumnDouble(int col) const;
  [[nodiscard]] std::string ColumnText(int col) const;
  [[nodiscard]] std::string ColumnBlob(int col) const;
  [[nodiscard]] bool ColumnIsNull(int col) const;

 private:
  absl::Status Check(int rc, std::string_view what) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database;

// An open transaction (BEGIN IMMEDIATE). Rolls back on destruction unless committed.
class Transaction {
 public:
  Transaction(Transaction&& o) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  friend class Database;
  Transaction(Database* db, std::unique_lock<std::recursive_mutex> lock)
      : db_(db), lock_(std::move(lock)) {}
  Database* db_;
  std::unique_lock<std::recursive_mutex> lock_;
  bool done_ = false;
};

struct DatabaseOptions {
  // FULL survives power loss; NORMAL (WAL) survives process crashes (kill -9).
  bool synchronous_full = true;
  int busy_timeout_ms = 5000;
  bool read_only = false;
};

class Database {
 public:
  // Opens (creating if needed) a database file in WAL mode.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const DatabaseOptions& options = {});
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements without results.
  absl::Status Exec(std::string_view sql);
  [[nodiscard]] absl::StatusOr<Statement> Prepare(std::string_view sql);
  [[nodiscard]] absl::StatusOr<Transaction> Begin();

  // Applies migrations[v..] where v is the stored schema version (table schema_version),
  // each in its own transaction together with the version bump. Versions are 1-based:
  // after Migrate, SchemaVersion() == migrations.size(). A database newer than the code
  // (more versions than migrations) is refused with FailedPrecondition.
  absl::Status Migrate(const std::vector<std::string>& migrations);
  [[nodiscard]] absl::StatusOr<int64_t> SchemaVersion();

  [[nodiscard]] int64_t LastInsertRowId() const;
  [[nodiscard]] int Changes() const;
  [[nodiscard]] const std::string& path() const { return path_; }
  // The journal mode SQLite reports ("wal").
  [[nodiscard]] absl::StatusOr<std::string> JournalMode();

 private:
  friend class Transaction;
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  std::recursive_mutex tx_mu_;
};

}  // namespace flotilla
