// A scale unit: an independent slice of the fleet with its own nodes, its own placement-engine
// replicas and its own journal, so that one unit's failure or overload never stalls another.
//
// Nodes join through RegisterNode/AddNode and heartbeat; a node silent for longer than the
// heartbeat timeout (CheckLiveness) is dead: its sandboxes become LOST (NODE_LOST) and its
// capacity leaves every replica's view. With a journal, Open() rebuilds the unit from it and
// each node's first heartbeat reconciles the node's own sandbox list with the journal.
//
// Thread-safety: every method is thread-safe. Placements go through the replicas with no
// unit-wide lock: the sandbox table is striped, each node has its own lock.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/common/clock.h"
#include "flotilla/proto/scheduler.pb.h"
#include "flotilla/scheduler/event_bus.h"
#include "flotilla/scheduler/journal.h"
#include "flotilla/scheduler/metrics.h"
#include "flotilla/scheduler/placement_engine.h"

namespace flotilla::scheduler {

struct ScaleUnitOptions {
  std::string name = "unit-0";
  uint32_t replicas = 4;
  EngineOptions engine;
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 5000;
  // A sandbox placed less than this long ago may be missing from a node's list (the list was
  // taken before the placement): reconciliation leaves it alone.
  int64_t reconcile_grace_ms = 2000;
  std::string journal_path;  // empty: no journal (the simulator's default)
  uint64_t seed = 0;         // 0: random
};

// A stable 64-bit fingerprint (FNV-1a over the deterministic encoding) of everything in a
// CreateSandboxRequest but its request_id: two requests with equal fingerprints ask for the
// same sandbox.
[[nodiscard]] uint64_t RequestFingerprint(const v1::CreateSandboxRequest& request);

struct UnitStats {
  PlacementStats placement;  // summed over replicas
  uint64_t live_nodes = 0;
  uint64_t dead_nodes = 0;
  uint64_t sandboxes = 0;  // entries held: pending + running + lost_now
  uint64_t pending = 0;
  uint64_t running = 0;
  uint64_t lost_now = 0;   // held in state LOST (until deleted)
  uint64_t lost = 0;       // declared lost since the unit opened
};

class ScaleUnit {
 public:
  // Opens the journal (if any) and restores the sandboxes and nodes recorded there; clients
  // for restored nodes come from `factory`. `events` (may be null; not owned; must outlive
  // the unit) receives every event.
  static absl::StatusOr<std::unique_ptr<ScaleUnit>> Open(const ScaleUnitOptions& options, const Clock& clock,
                                                         NodeClientFactory factory, EventBus* events);
  ~ScaleUnit();
  ScaleUnit(const ScaleUnit&) = delete;
  ScaleUnit& operator=(const ScaleUnit&) = delete;

  // Adds (or re-adds) a node with a client already made; `usage` is its first report.
  absl::Status AddNode(const std::string& node_id, const std::string& address, std::shared_ptr<NodeClient> client,
                       const NodeUsageSnapshot& usage);
  // Adds a node by address, making its client with the factory.
  absl::Status RegisterNode(const std::string& node_id, const std::string& address, const NodeUsageSnapshot& usage);
  // A node's heartbeat. With `sandbox_ids`, reconciles: returns the ids the node has and the
  // unit does not know (the node should destroy them); journaled sandboxes the node no longer
  // has become LOST. NotFound for a node that never registered (or was declared dead).
  absl::StatusOr<std::vector<std::string>> Heartbeat(const std::string& node_id, const NodeUsageSnapshot& usage,
                                                     const std::vector<std::string>* sandbox_ids);
  // Declares nodes silent for longer than the timeout dead. Returns how many died now.
  size_t CheckLiveness();

  // Places and creates a sandbox; returns once the placement is journaled. ResourceExhausted
  // when the unit has no room. `attempts` (optional) receives the node calls made.
  // A request with a request_id that this unit has seen is answered as Replay answers it,
  // and places nothing; the id is journaled with the sandbox, so this holds across restarts.
  absl::StatusOr<v1::SandboxPlacement> CreateSandbox(const v1::CreateSandboxRequest& request,
                                                     uint32_t* attempts = nullptr);
  // What repeating a request with a client request_id gets: nullopt when this unit never
  // acknowledged that id; else the sandbox it placed for it (in its current state),
  // AlreadyExists when `request` differs from the request that first used the id, Aborted
  // while that first request is still being placed, FailedPrecondition once its sandbox was
  // deleted.
  [[nodiscard]] std::optional<absl::StatusOr<v1::SandboxPlacement>> Replay(
      const v1::CreateSandboxRequest& request) const;
  // Destroys a sandbox. NotFound when the unit does not have it.
  absl::Status DeleteSandbox(const std::string& sandbox_id);
  absl::StatusOr<v1::SandboxPlacement> GetSandbox(const std::string& sandbox_id) const;
  // Sandboxes matching every non-empty filter.
  std::vector<v1::SandboxPlacement> ListSandboxes(const v1::ListSandboxesRequest& filter) const;

  // Share of the live nodes' slots held by this unit's sandboxes (0 with no nodes: 1).
  [[nodiscard]] double Fill() const;
  [[nodiscard]] bool HasNode(const std::string& node_id) const;
  // Every node that joined this unit, alive or not, ordered by id.
  [[nodiscard]] std::vector<v1::NodeInfo> ListNodes() const;
  [[nodiscard]] UnitStats Stats() const;
  // Latency of every successful CreateSandbox (choice, node calls, journal).
  [[nodiscard]] const LatencyHistogram& latency() const { return latency_; }
  [[nodiscard]] const std::string& name() const { return options_.name; }
  [[nodiscard]] const ScaleUnitOptions& options() const { return options_; }
  [[nodiscard]] PlacementEngine& replica(size_t i) { return *replicas_[i]; }
  [[nodiscard]] size_t replica_count() const { return replicas_.size(); }

 private:
  struct Entry {
    std::string tenant;
    std::shared_ptr<NodeHandle> node;  // null until placed
    std::string node_id;
    uint32_t partition = 0;
    ResourceVector request;
    v1::ExecutionClass execution_class = v1::BEST_EFFORT;
    v1::SandboxPlacement::State state = v1::SandboxPlacement::PENDING;
    v1::StopReason reason = v1::STOP_REASON_NONE;
    std::vector<std::pair<std::string, std::string>> labels;
    int64_t created_unix_ms = 0;
    int64_t placed_ns = 0;
  };
  struct Stripe {
    mutable absl::Mutex mu;
    absl::node_hash_map<std::string, Entry> map ABSL_GUARDED_BY(mu);
  };
  struct NodeState {
    std::shared_ptr<NodeHandle> handle;
    int64_t last_heartbeat_ns = 0;
    bool in_views = false;  // restored from the journal: joins the views at its first heartbeat
  };
  // A client request id and what it was used for.
  struct RequestRecord {
    std::string sandbox_id;    // empty while the first request is still being placed
    uint64_t fingerprint = 0;  // RequestFingerprint of that request
  };
  static constexpr size_t kStripes = 64;

  ScaleUnit(const ScaleUnitOptions& options, const Clock& clock, NodeClientFactory factory, EventBus* events);
  absl::Status Restore();
  Stripe& StripeFor(const std::string& id) const;
  v1::SandboxPlacement ToPlacement(const std::string& id, const Entry& e) const;
  void Publish(const std::string& id, const Entry& e, v1::SandboxEvent::Kind kind, const std::string& detail);
  // Marks a sandbox LOST (journal, table, event).
  void MarkLost(const std::string& id, v1::StopReason reason, const std::string& detail);
  void KillNode(const std::shared_ptr<NodeHandle>& node, const std::string& detail);
  void Forget(const std::string& id, const Entry& e);
  void RecountCapacity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_);
  absl::StatusOr<v1::SandboxPlacement> ReplayRecord(const std::string& request_id, const RequestRecord& record,
                                                    uint64_t fingerprint) const;

  const ScaleUnitOptions options_;
  const Clock& clock_;
  const NodeClientFactory factory_;
  EventBus* const events_;
  std::unique_ptr<Journal> journal_;
  std::vector<std::unique_ptr<PlacementEngine>> replicas_;
  std::atomic<uint64_t> next_replica_{0};
  std::atomic<uint64_t> lost_{0};
  LatencyHistogram latency_;
  std::atomic<int64_t> used_slots_{0};
  std::atomic<int64_t> capacity_slots_{0};
  mutable std::array<Stripe, kStripes> stripes_;
  mutable absl::Mutex requests_mu_;
  absl::flat_hash_map<std::string, RequestRecord> requests_ ABSL_GUARDED_BY(requests_mu_);

  mutable absl::Mutex nodes_mu_;
  absl::flat_hash_map<std::string, NodeState> nodes_ ABSL_GUARDED_BY(nodes_mu_);
  uint64_t dead_nodes_ ABSL_GUARDED_BY(nodes_mu_) = 0;
};

}  // namespace flotilla::scheduler
