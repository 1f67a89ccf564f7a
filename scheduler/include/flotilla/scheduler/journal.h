// A scale unit's durable journal: one SQLite file in WAL mode holding every acknowledged
// sandbox (with its placement and state) and every registered node. Writes are group
// committed: concurrent callers' records share one transaction, and each call returns only
// once its record is durable, so whatever a caller acknowledged survives kill -9.
//
// Thread-safe. Owns a writer thread, joined on destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/common/sqlite.h"
#include "flotilla/proto/scheduler.pb.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

// A sandbox as the scheduler keeps it.
struct SandboxRecord {
  v1::SandboxPlacement placement;  // id, node, unit, partition, state, labels, created time
  std::string tenant;
  ResourceVector request;
  v1::ExecutionClass execution_class = v1::BEST_EFFORT;
  // The client's idempotency key (empty: none) and the fingerprint of the request it named.
  std::string request_id;
  uint64_t request_fingerprint = 0;
};

struct NodeRecord {
  std::string id;
  std::string address;
};

class Journal {
 public:
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Each returns once the change is durable (or with the error that kept it from being).
  absl::Status RecordSandbox(const SandboxRecord& record);
  absl::Status RecordState(const std::string& sandbox_id, v1::SandboxPlacement::State state,
                           v1::StopReason reason);
  absl::Status RecordNode(const NodeRecord& node);

  // Everything recorded, for a restart. Sandboxes come with their latest state.
  absl::StatusOr<std::vector<SandboxRecord>> LoadSandboxes();
  absl::StatusOr<std::vector<NodeRecord>> LoadNodes();

  [[nodiscard]] uint64_t commits() const;
  [[nodiscard]] const std::string& path() const { return db_->path(); }

 private:
  struct Op {
    enum Kind { kSandbox, kState, kNode } kind = kSandbox;
    SandboxRecord sandbox;
    std::string id;
    v1::SandboxPlacement::State state = v1::SandboxPlacement::STATE_UNSPECIFIED;
    v1::StopReason reason = v1::STOP_REASON_NONE;
    NodeRecord node;
  };
  explicit Journal(std::unique_ptr<Database> db);
  absl::Status Submit(Op op);
  void WriterLoop();
  absl::Status Apply(const std::vector<Op>& ops);

  std::unique_ptr<Database> db_;
  mutable absl::Mutex mu_;
  std::vector<Op> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;  // sequence of the last submitted op
  uint64_t durable_ ABSL_GUARDED_BY(mu_) = 0;    // ops up to here are settled
  // Results of settled batches that failed: (first seq, last seq, status).
  struct Failure {
    uint64_t first, last;
    absl::Status status;
  };
  std::vector<Failure> failures_ ABSL_GUARDED_BY(mu_);
  uint64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
};

}  // namespace flotilla::scheduler
