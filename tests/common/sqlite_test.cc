#include "flotilla/common/sqlite.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

const std::vector<std::string> kMigrations = {
    "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "ALTER TABLE items ADD COLUMN weight REAL NOT NULL DEFAULT 1.0",
};

int64_t CountItems(Database& db) {
  auto st = db.Prepare("SELECT COUNT(*) FROM items");
  EXPECT_TRUE(st.ok());
  EXPECT_TRUE(*st->Step());
  return st->ColumnInt(0);
}

TEST(SqliteTest, OpensInWalMode) {
  testing::TempDir dir;
  auto db = Database::Open(dir.file("a.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*(*db)->JournalMode(), "wal");
}

// Processes that open one new database at the same moment all get it, in WAL mode (the
// losers of the switch to WAL are answered SQLITE_BUSY at once and retry).
TEST(SqliteTest, ConcurrentFirstOpensAllSucceed) {
  for (int round = 0; round < 5; ++round) {
    testing::TempDir dir;
    const std::string path = dir.file("race.db");
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<pid_t> kids;
    for (int i = 0; i < 6; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) {
        char c;
        ::close(go[1]);
        if (::read(go[0], &c, 1) != 0) ::_exit(3);  // all start when the pipe closes
        auto db = Database::Open(path);
        ::_exit(db.ok() && *(*db)->JournalMode() == "wal" ? 0 : 1);
      }
      kids.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);
    for (pid_t pid : kids) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
  }
}

TEST(SqliteTest, MigratesOnceAndRecordsVersion) {
  testing::TempDir dir;
  {
    auto db = *Database::Open(dir.file("m.db"));
    EXPECT_EQ(*db->SchemaVersion(), 0);
    ASSERT_TRUE(db->Migrate({kMigrations[0]}).ok());
    EXPECT_EQ(*db->SchemaVersion(), 1);
  }
  auto db = *Database::Open(dir.file("m.db"));
  ASSERT_TRUE(db->Migrate(kMigrations).ok());
  EXPECT_EQ(*db->SchemaVersion(), 2);
  // Running again applies nothing and keeps the version.
  ASSERT_TRUE(db->Migrate(kMigrations).ok());
  EXPECT_EQ(*db->SchemaVersion(), 2);
  auto st = *db->Prepare("INSERT INTO items(name, weight) VALUES('a', 2.5)");
  EXPECT_TRUE(st.Run().ok());
}

TEST(SqliteTest, RefusesDatabaseNewerThanProgram) {
  testing::TempDir dir;
  auto db = *Database::Open(dir.file("n.db"));
  ASSERT_TRUE(db->Migrate(kMigrations).ok());
  absl::Status s = db->Migrate({kMigrations[0]});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SqliteTest, FailedMigrationLeavesVersionUnchanged) {
  testing::TempDir dir;
  auto db = *Database::Open(dir.file("f.db"));
  absl::Status s = db->Migrate({kMigrations[0], "ALTER TABLE nope ADD COLUMN x"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*db->SchemaVersion(), 1);
}

TEST(SqliteTest, UncommittedTransactionRollsBack) {
  testing::TempDir dir;
  auto db = *Database::Open(dir.file("t.db"));
  ASSERT_TRUE(db->Migrate(kMigrations).ok());
  {
    auto tx = *db->Begin();
    ASSERT_TRUE(db->Exec("INSERT INTO items(name) VALUES('x')").ok());
    EXPECT_EQ(CountItems(*db), 1);
  }
  EXPECT_EQ(CountItems(*db), 0);
  {
    auto tx = *db->Begin();
    ASSERT_TRUE(db->Exec("INSERT INTO items(name) VALUES('y')").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(CountItems(*db), 1);
}

TEST(SqliteTest, ConstraintViolationIsAlreadyExists) {
  testing::TempDir dir;
  auto db = *Database::Open(dir.file("c.db"));
  ASSERT_TRUE(db->Migrate(kMigrations).ok());
  auto st = *db->Prepare("INSERT INTO items(name) VALUES(?)");
  ASSERT_TRUE(st.Bind(1, "dup").ok());
  ASSERT_TRUE(st.Run().ok());
  st.Reset();
  ASSERT_TRUE(st.Bind(1, "dup").ok());
  EXPECT_EQ(st.Run().code(), absl::StatusCode::kAlreadyExists);
}

// A child commits N rows, starts another transaction, and is killed with SIGKILL in the
// middle of it. The parent reopens: every committed row is there, the torn one is not.
TEST(SqliteTest, CommittedRowsSurviveKillNine) {
  testing::TempDir dir;
  std::string path = dir.file("k.db");
  {
    auto db = *Database::Open(path);
    ASSERT_TRUE(db->Migrate(kMigrations).ok());
  }
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    auto db = *Database::Open(path);
    for (int i = 0; i < 50; ++i) {
      auto tx = *db->Begin();
      auto st = *db->Prepare("INSERT INTO items(name) VALUES(?)");
      (void)st.Bind(1, "row" + std::to_string(i));
      (void)st.Run();
      (void)tx.Commit();
    }
    auto tx = *db->Begin();
    (void)db->Exec("INSERT INTO items(name) VALUES('torn')");
    char c = 'x';
    (void)!write(pipefd[1], &c, 1);
    pause();
    _exit(0);
  }
  close(pipefd[1]);
  char c;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  close(pipefd[0]);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto db = *Database::Open(path);
  EXPECT_EQ(CountItems(*db), 50);
  auto st = *db->Prepare("SELECT COUNT(*) FROM items WHERE name = 'torn'");
  ASSERT_TRUE(*st.Step());
  EXPECT_EQ(st.ColumnInt(0), 0);
}

TEST(SqliteTest, BlobAndNullRoundTrip) {
  testing::TempDir dir;
  auto db = *Database::Open(dir.file("b.db"));
  ASSERT_TRUE(db->Exec("CREATE TABLE b(x BLOB, y TEXT)").ok());
  auto ins = *db->Prepare("INSERT INTO b VALUES(?, ?)");
  std::string bytes("\0\1\2\xff", 4);
  ASSERT_TRUE(ins.BindBlob(1, bytes).ok());
  ASSERT_TRUE(ins.BindNull(2).ok());
  ASSERT_TRUE(ins.Run().ok());
  auto sel = *db->Prepare("SELECT x, y FROM b");
  ASSERT_TRUE(*sel.Step());
  EXPECT_EQ(sel.ColumnBlob(0), bytes);
  EXPECT_TRUE(sel.ColumnIsNull(1));
}

}  // namespace
}  // namespace flotilla
