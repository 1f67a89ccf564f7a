#include "flotilla/synth/synth_state.h"

#include <chrono>

#include "flotilla/common/status.h"

namespace flotilla::synth {
namespace {

double NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SynthState>> SynthState::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  RETURN_IF_ERROR(db->Migrate({
      "CREATE TABLE stages(stage TEXT PRIMARY KEY, result TEXT NOT NULL, seconds REAL NOT NULL)",
      "CREATE TABLE decisions(id INTEGER PRIMARY KEY, ts REAL, stage TEXT, subject TEXT, decision TEXT, "
      "reason TEXT)",
      "CREATE TABLE candidates(id TEXT PRIMARY KEY, source TEXT, kind TEXT, file TEXT, line INTEGER, "
      "start INTEGER, end_ INTEGER, replacement TEXT, description TEXT, state TEXT, reason TEXT, "
      "fail_to_pass TEXT, pass_to_pass TEXT, messages TEXT, seconds REAL, seq INTEGER)",
      "CREATE TABLE difficulty(task TEXT NOT NULL, policy TEXT NOT NULL, attempts INTEGER, solved INTEGER, "
      "solve_rate REAL, label TEXT, reason TEXT, seconds REAL, PRIMARY KEY(task, policy))",
  }));
  return std::unique_ptr<SynthState>(new SynthState(std::move(db)));
}

absl::StatusOr<std::optional<std::string>> SynthState::StageResult(const std::string& stage) {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT result FROM stages WHERE stage = ?"));
  RETURN_IF_ERROR(st.Bind(1, stage));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(st.ColumnText(0));
}

absl::Status SynthState::CompleteStage(const std::string& stage, const std::string& result, double seconds) {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("INSERT OR REPLACE INTO stages(stage, result, seconds) VALUES(?,?,?)"));
  RETURN_IF_ERROR(st.Bind(1, stage));
  RETURN_IF_ERROR(st.Bind(2, result));
  RETURN_IF_ERROR(st.Bind(3, seconds));
  return st.Run();
}

absl::StatusOr<std::vector<std::pair<std::string, double>>> SynthState::StageSeconds() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT stage, seconds FROM stages ORDER BY rowid"));
  std::vector<std::pair<std::string, double>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.emplace_back(st.ColumnText(0), st.ColumnDouble(1));
  }
  return out;
}

absl::Status SynthState::Decide(const std::string& stage, const std::string& subject, const std::string& decision,
                                const std::string& reason) {
  ASSIGN_OR_RETURN(Statement st,
                   db_->Prepare("INSERT INTO decisions(ts, stage, subject, decision, reason) VALUES(?,?,?,?,?)"));
  RETURN_IF_ERROR(st.Bind(1, NowUnix()));
  RETURN_IF_ERROR(st.Bind(2, stage));
  RETURN_IF_ERROR(st.Bind(3, subject));
  RETURN_IF_ERROR(st.Bind(4, decision));
  RETURN_IF_ERROR(st.Bind(5, reason));
  return st.Run();
}

absl::StatusOr<std::vector<DecisionRow>> SynthState::Decisions() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT ts, stage, subject, decision, reason FROM decisions ORDER BY id"));
  std::vector<DecisionRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({st.ColumnDouble(0), st.ColumnText(1), st.ColumnText(2), st.ColumnText(3), st.ColumnText(4)});
  }
  return out;
}

absl::Status SynthState::AddCandidates(const std::vector<CandidateRow>& rows) {
  ASSIGN_OR_RETURN(Transaction tx, db_->Begin());
  ASSIGN_OR_RETURN(Statement st, db_->Prepare(
                                     "INSERT OR IGNORE INTO candidates(id, source, kind, file, line, start, end_, "
                                     "replacement, description, state, reason, fail_to_pass, pass_to_pass, messages, "
                                     "seconds, seq) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  int64_t seq = 0;
  for (const CandidateRow& r : rows) {
    st.Reset();
    RETURN_IF_ERROR(st.Bind(1, r.id));
    RETURN_IF_ERROR(st.Bind(2, r.source));
    RETURN_IF_ERROR(st.Bind(3, r.kind));
    RETURN_IF_ERROR(st.Bind(4, r.file));
    RETURN_IF_ERROR(st.Bind(5, r.line));
    RETURN_IF_ERROR(st.Bind(6, r.start));
    RETURN_IF_ERROR(st.Bind(7, r.end));
    RETURN_IF_ERROR(st.Bind(8, r.replacement));
    RETURN_IF_ERROR(st.Bind(9, r.description));
    RETURN_IF_ERROR(st.Bind(10, r.state));
    RETURN_IF_ERROR(st.Bind(11, r.reason));
    RETURN_IF_ERROR(st.Bind(12, r.fail_to_pass));
    RETURN_IF_ERROR(st.Bind(13, r.pass_to_pass));
    RETURN_IF_ERROR(st.Bind(14, r.messages));
    RETURN_IF_ERROR(st.Bind(15, r.seconds));
    RETURN_IF_ERROR(st.Bind(16, seq++));
    RETURN_IF_ERROR(st.Run());
  }
  return tx.Commit();
}

absl::Status SynthState::UpdateCandidate(const CandidateRow& r) {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("UPDATE candidates SET state=?, reason=?, fail_to_pass=?, "
                                              "pass_to_pass=?, messages=?, seconds=? WHERE id=?"));
  RETURN_IF_ERROR(st.Bind(1, r.state));
  RETURN_IF_ERROR(st.Bind(2, r.reason));
  RETURN_IF_ERROR(st.Bind(3, r.fail_to_pass));
  RETURN_IF_ERROR(st.Bind(4, r.pass_to_pass));
  RETURN_IF_ERROR(st.Bind(5, r.messages));
  RETURN_IF_ERROR(st.Bind(6, r.seconds));
  RETURN_IF_ERROR(st.Bind(7, r.id));
  return st.Run();
}

absl::StatusOr<std::vector<CandidateRow>> SynthState::Candidates() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare(
                                     "SELECT id, source, kind, file, line, start, end_, replacement, description, "
                                     "state, reason, fail_to_pass, pass_to_pass, messages, seconds FROM candidates "
                                     "ORDER BY seq"));
  std::vector<CandidateRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    CandidateRow r;
    r.id = st.ColumnText(0);
    r.source = st.ColumnText(1);
    r.kind = st.ColumnText(2);
    r.file = st.ColumnText(3);
    r.line = static_cast<int>(st.ColumnInt(4));
    r.start = st.ColumnInt(5);
    r.end = st.ColumnInt(6);
    r.replacement = st.ColumnText(7);
    r.description = st.ColumnText(8);
    r.state = st.ColumnText(9);
    r.reason = st.ColumnText(10);
    r.fail_to_pass = st.ColumnText(11);
    r.pass_to_pass = st.ColumnText(12);
    r.messages = st.ColumnText(13);
    r.seconds = st.ColumnDouble(14);
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::optional<DifficultyRow>> SynthState::Difficulty(const std::string& task,
                                                                    const std::string& policy) {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT task, policy, attempts, solved, solve_rate, label, reason, "
                                              "seconds FROM difficulty WHERE task = ? AND policy = ?"));
  RETURN_IF_ERROR(st.Bind(1, task));
  RETURN_IF_ERROR(st.Bind(2, policy));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<DifficultyRow>();
  return std::optional<DifficultyRow>(DifficultyRow{st.ColumnText(0), st.ColumnText(1),
                                                    static_cast<int>(st.ColumnInt(2)), static_cast<int>(st.ColumnInt(3)),
                                                    st.ColumnDouble(4), st.ColumnText(5), st.ColumnText(6),
                                                    st.ColumnDouble(7)});
}

absl::Status SynthState::SetDifficulty(const DifficultyRow& r) {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("INSERT OR REPLACE INTO difficulty(task, policy, attempts, solved, "
                                              "solve_rate, label, reason, seconds) VALUES(?,?,?,?,?,?,?,?)"));
  RETURN_IF_ERROR(st.Bind(1, r.task));
  RETURN_IF_ERROR(st.Bind(2, r.policy));
  RETURN_IF_ERROR(st.Bind(3, r.attempts));
  RETURN_IF_ERROR(st.Bind(4, r.solved));
  RETURN_IF_ERROR(st.Bind(5, r.solve_rate));
  RETURN_IF_ERROR(st.Bind(6, r.label));
  RETURN_IF_ERROR(st.Bind(7, r.reason));
  RETURN_IF_ERROR(st.Bind(8, r.seconds));
  return st.Run();
}

absl::StatusOr<std::vector<DifficultyRow>> SynthState::Difficulties() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT task, policy, attempts, solved, solve_rate, label, reason, "
                                              "seconds FROM difficulty ORDER BY task, policy"));
  std::vector<DifficultyRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({st.ColumnText(0), st.ColumnText(1), static_cast<int>(st.ColumnInt(2)),
                   static_cast<int>(st.ColumnInt(3)), st.ColumnDouble(4), st.ColumnText(5), st.ColumnText(6),
                   st.ColumnDouble(7)});
  }
  return out;
}

}  // namespace flotilla::synth
