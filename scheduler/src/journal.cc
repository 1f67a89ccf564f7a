#include "flotilla/scheduler/journal.h"

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {
namespace {

const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> m = {
      "CREATE TABLE sandboxes(id TEXT PRIMARY KEY, tenant TEXT NOT NULL, node_id TEXT NOT NULL,"
      " state INTEGER NOT NULL, lost_reason INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
      " cpu_millicores INTEGER NOT NULL, slots INTEGER NOT NULL, execution_class INTEGER NOT NULL,"
      " placement BLOB NOT NULL);"
      "CREATE INDEX sandboxes_node ON sandboxes(node_id);"
      "CREATE TABLE nodes(id TEXT PRIMARY KEY, address TEXT NOT NULL);",
      "ALTER TABLE sandboxes ADD COLUMN request_id TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE sandboxes ADD COLUMN request_fingerprint INTEGER NOT NULL DEFAULT 0;",
  };
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  RETURN_IF_ERROR(Annotate(db->Migrate(Migrations()), absl::StrCat("journal ", path)));
  return std::unique_ptr<Journal>(new Journal(std::move(db)));
}

Journal::Journal(std::unique_ptr<Database> db) : db_(std::move(db)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

Journal::~Journal() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
}

absl::Status Journal::Submit(Op op) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("journal is closing");
  pending_.push_back(std::move(op));
  uint64_t seq = ++submitted_;
  auto settled = [this, seq]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return durable_ >= seq; };
  mu_.Await(absl::Condition(&settled));
  for (const Failure& f : failures_) {
    if (seq >= f.first && seq <= f.last) return f.status;
  }
  return absl::OkStatus();
}

void Journal::WriterLoop() {
  for (;;) {
    std::vector<Op> batch;
    uint64_t first = 0, last = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Journal* j) ABSL_NO_THREAD_SAFETY_ANALYSIS { return j->stopping_ || !j->pending_.empty(); }, this));
      if (pending_.empty() && stopping_) return;
      batch.swap(pending_);
      last = submitted_;
      first = last - batch.size() + 1;
    }
    absl::Status s = Apply(batch);
    absl::MutexLock lock(&mu_);
    if (!s.ok()) failures_.push_back({first, last, s});
    ++commits_;
    durable_ = last;
  }
}

absl::Status Journal::Apply(const std::vector<Op>& ops) {
  ASSIGN_OR_RETURN(Transaction tx, db_->Begin());
  ASSIGN_OR_RETURN(Statement put_sandbox,
                   db_->Prepare("INSERT OR REPLACE INTO sandboxes(id, tenant, node_id, state, lost_reason,"
                                " memory_bytes, cpu_millicores, slots, execution_class, placement, request_id,"
                                " request_fingerprint) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  ASSIGN_OR_RETURN(Statement put_state, db_->Prepare("UPDATE sandboxes SET state = ?, lost_reason = ? WHERE id = ?"));
  ASSIGN_OR_RETURN(Statement put_node, db_->Prepare("INSERT OR REPLACE INTO nodes(id, address) VALUES(?, ?)"));
  for (const Op& op : ops) {
    switch (op.kind) {
      case Op::kSandbox: {
        const SandboxRecord& r = op.sandbox;
        put_sandbox.Reset();
        RETURN_IF_ERROR(put_sandbox.Bind(1, r.placement.sandbox_id()));
        RETURN_IF_ERROR(put_sandbox.Bind(2, r.tenant));
        RETURN_IF_ERROR(put_sandbox.Bind(3, r.placement.node_id()));
        RETURN_IF_ERROR(put_sandbox.Bind(4, static_cast<int64_t>(r.placement.state())));
        RETURN_IF_ERROR(put_sandbox.Bind(5, static_cast<int64_t>(r.placement.lost_reason())));
        RETURN_IF_ERROR(put_sandbox.Bind(6, static_cast<int64_t>(r.request.memory_bytes)));
        RETURN_IF_ERROR(put_sandbox.Bind(7, static_cast<int64_t>(r.request.cpu_millicores)));
        RETURN_IF_ERROR(put_sandbox.Bind(8, static_cast<int64_t>(r.request.slots)));
        RETURN_IF_ERROR(put_sandbox.Bind(9, static_cast<int64_t>(r.execution_class)));
        RETURN_IF_ERROR(put_sandbox.BindBlob(10, r.placement.SerializeAsString()));
        RETURN_IF_ERROR(put_sandbox.Bind(11, r.request_id));
        // SQLite integers are signed: the fingerprint's bits are stored as they are.
        RETURN_IF_ERROR(put_sandbox.Bind(12, static_cast<int64_t>(r.request_fingerprint)));
        RETURN_IF_ERROR(put_sandbox.Run());
        break;
      }
      case Op::kState:
        put_state.Reset();
        RETURN_IF_ERROR(put_state.Bind(1, static_cast<int64_t>(op.state)));
        RETURN_IF_ERROR(put_state.Bind(2, static_cast<int64_t>(op.reason)));
        RETURN_IF_ERROR(put_state.Bind(3, op.id));
        RETURN_IF_ERROR(put_state.Run());
        break;
      case Op::kNode:
        put_node.Reset();
        RETURN_IF_ERROR(put_node.Bind(1, op.node.id));
        RETURN_IF_ERROR(put_node.Bind(2, op.node.address));
        RETURN_IF_ERROR(put_node.Run());
        break;
    }
  }
  return tx.Commit();
}

absl::Status Journal::RecordSandbox(const SandboxRecord& record) {
  Op op;
  op.kind = Op::kSandbox;
  op.sandbox = record;
  return Submit(std::move(op));
}

absl::Status Journal::RecordState(const std::string& sandbox_id, v1::SandboxPlacement::State state,
                                  v1::StopReason reason) {
  Op op;
  op.kind = Op::kState;
  op.id = sandbox_id;
  op.state = state;
  op.reason = reason;
  return Submit(std::move(op));
}

absl::Status Journal::RecordNode(const NodeRecord& node) {
  Op op;
  op.kind = Op::kNode;
  op.node = node;
  return Submit(std::move(op));
}

absl::StatusOr<std::vector<SandboxRecord>> Journal::LoadSandboxes() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT tenant, state, lost_reason, memory_bytes, cpu_millicores,"
                                              " slots, execution_class, placement, request_id, request_fingerprint"
                                              " FROM sandboxes ORDER BY rowid"));
  std::vector<SandboxRecord> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    SandboxRecord r;
    if (!r.placement.ParseFromString(st.ColumnBlob(7))) {
      return absl::DataLossError(absl::StrCat("journal ", path(), ": unreadable placement record"));
    }
    r.tenant = st.ColumnText(0);
    r.placement.set_state(static_cast<v1::SandboxPlacement::State>(st.ColumnInt(1)));
    r.placement.set_lost_reason(static_cast<v1::StopReason>(st.ColumnInt(2)));
    r.request.memory_bytes = static_cast<uint64_t>(st.ColumnInt(3));
    r.request.cpu_millicores = static_cast<uint32_t>(st.ColumnInt(4));
    r.request.slots = static_cast<uint32_t>(st.ColumnInt(5));
    r.execution_class = static_cast<v1::ExecutionClass>(st.ColumnInt(6));
    r.request_id = st.ColumnText(8);
    r.request_fingerprint = static_cast<uint64_t>(st.ColumnInt(9));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<NodeRecord>> Journal::LoadNodes() {
  ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT id, address FROM nodes ORDER BY rowid"));
  std::vector<NodeRecord> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({st.ColumnText(0), st.ColumnText(1)});
  }
  return out;
}

uint64_t Journal::commits() const {
  absl::MutexLock lock(&mu_);
  return commits_;
}

}  // namespace flotilla::scheduler
