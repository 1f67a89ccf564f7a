// One placement-engine replica. Each replica places from its own view of its scale unit's
// nodes: the nodes' recent reports, a usage trend extrapolated from them, and this replica's
// own reservations for placements it has in flight (asked of a node, not yet answered), which
// decay exponentially so that a stuck call stops holding capacity and the view converges on
// the measured usage. Replicas share no lock and run no consensus: two
// of them may pick the same last slot; the node's admission check rejects one, which then
// refreshes its view from the rejection and retries elsewhere (bounded, with jitter).
//
// Thread-safety: every method is thread-safe. A replica's view is guarded by the replica's
// own mutex, never held across a call to a node. The NodeHandles are shared with the unit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/common/clock.h"
#include "flotilla/admission/admission_limits.h"
#include "flotilla/scheduler/node_client.h"

namespace flotilla::scheduler {

// A node as the unit knows it; shared by every replica. id, address and client are fixed at
// construction; the counters are atomics; `sandbox_ids` is guarded by `mu` (one lock per node).
struct NodeHandle {
  std::string id;
  std::string address;
  std::shared_ptr<NodeClient> client;
  // Execution-class mix of sandboxes the unit placed there (kept by the unit).
  std::atomic<uint32_t> sandboxes{0};
  std::atomic<uint32_t> latency_sensitive{0};
  std::atomic<bool> alive{true};
  std::atomic<uint32_t> slots_capacity{0};
  absl::Mutex mu;
  absl::flat_hash_set<std::string> sandbox_ids ABSL_GUARDED_BY(mu);
};

enum class FitPolicy { kBestFit, kSpread };

struct EngineOptions {
  FitPolicy fit = FitPolicy::kBestFit;
  double fit_weight = 1.0;
  double partition_weight = 0.25;    // prefer partitions whose memory and slot use stay balanced
  double class_mix_weight = 0.25;    // spread latency-sensitive sandboxes across nodes (as of each
                                     // node's last report or answer)
  double tie_break = 0.02;           // random jitter so replicas do not herd onto one node
  uint32_t max_attempts = 5;         // node calls per placement
  uint32_t retry_backoff_us = 0;     // before retry k: uniform in [0, backoff << k) microseconds
  int64_t reservation_decay_ms = 1000;  // time constant of a reservation's exponential decay
  int64_t trend_horizon_ms = 1000;   // extrapolate a report's trend at most this far
  uint32_t candidate_sample = 0;     // stop after this many feasible nodes (0: score all)
  int64_t suspect_ms = 1000;         // skip a node this long after a failed call
  admission::AdmissionConfig admission;  // the nodes' admission config, to predict their decisions
};

struct PlacementStats {
  uint64_t placements = 0;
  uint64_t attempts = 0;     // node calls
  uint64_t rejections = 0;   // node said no
  uint64_t conflicts = 0;    // the node's usage differed from this replica's view
  uint64_t node_errors = 0;  // the node could not be asked
  uint64_t no_capacity = 0;  // the view had no node that fits
  uint64_t retries = 0;      // node calls beyond the first for one placement
};

struct Placement {
  std::shared_ptr<NodeHandle> node;
  uint32_t partition = 0;
  uint32_t attempts = 0;
};

class PlacementEngine {
 public:
  PlacementEngine(std::string name, const EngineOptions& options, const Clock& clock, uint64_t seed);
  PlacementEngine(const PlacementEngine&) = delete;
  PlacementEngine& operator=(const PlacementEngine&) = delete;

  // View maintenance. A heartbeat report replaces the node's base usage and updates its
  // trend; a node's answer to a placement replaces the base too (it is fresher).
  void AddNode(std::shared_ptr<NodeHandle> node, const NodeUsageSnapshot& usage);
  void RemoveNode(const std::string& node_id);
  void OnReport(const std::string& node_id, const NodeUsageSnapshot& usage);

  // Places `request` (sandbox id, resources, class; the partition is chosen here) on some
  // node: choose, ask the node, and on rejection refresh the view and retry elsewhere.
  // ResourceExhausted when no node fits (the view's or, after max_attempts, the nodes').
  absl::StatusOr<Placement> Place(PlaceRequest request);

  // The two halves of Place, for tests and callers that ask the node themselves.
  struct Choice {
    std::shared_ptr<NodeHandle> node;
    uint32_t partition = 0;
    ResourceVector predicted_used;  // the view's prediction before this placement
  };
  // Picks a node and partition and reserves the request there. ResourceExhausted if none fits.
  absl::StatusOr<Choice> Choose(const ResourceVector& request, v1::ExecutionClass cls);
  // Folds the node's answer (or failure) into the view. Returns true when it was a conflict.
  bool Settle(const Choice& choice, const ResourceVector& request, const absl::StatusOr<PlaceResult>& result);

  // This replica's prediction of a partition's usage now (NotFound for unknown nodes).
  [[nodiscard]] absl::StatusOr<ResourceVector> PredictedUsage(const std::string& node_id, uint32_t partition) const;
  [[nodiscard]] PlacementStats stats() const;
  [[nodiscard]] size_t node_count() const;
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  // A small, fast generator for tie-breaks and jitter (SplitMix64): the choice loop draws
  // one number per near-best candidate.
  class TieBreakRng {
   public:
    explicit TieBreakRng(uint64_t seed) : state_(seed) {}
    uint64_t operator()() {
      uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return z ^ (z >> 31);
    }

   private:
    uint64_t state_;
  };
  struct PartitionView {
    ResourceVector capacity;
    ResourceVector limits;        // the node's warning limits
    double inv_slot_limit = 0;    // 1 / limits.slots (0 when the limit is 0), for scoring
    double inv_memory_limit = 0;
    ResourceVector base;          // last authoritative usage
    double slots_per_ns = 0;      // trend from consecutive heartbeats
    double memory_per_ns = 0;
    ResourceVector last_report;   // the previous heartbeat's usage, for the trend
    double reserved_slots = 0;    // decaying reservations
    double reserved_memory = 0;
    double reserved_cpu = 0;
    int64_t reserved_ns = 0;      // when the reservation values were last decayed
  };
  struct NodeView {
    std::shared_ptr<NodeHandle> node;
    absl::InlinedVector<PartitionView, 2> partitions;  // inline: the choice loop reads them all
    int64_t base_ns = 0;          // when `base` was learned
    int64_t report_ns = 0;        // last heartbeat report
    int64_t suspect_until_ns = 0; // a node that failed a call is skipped until then
    // Latency-sensitive share of the node's sandboxes (NodeHandle counters), as of the node's
    // last report or answer: the choice loop reads this replica's copy, not the shared
    // counters every placement writes.
    double ls_share = 0;
  };

  void ApplyUsage(NodeView& v, const NodeUsageSnapshot& usage, int64_t now, bool heartbeat)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ResourceVector Predict(const NodeView& v, const PartitionView& p, int64_t now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The same with the trend's time span `trend_ns` (now - base, capped at the horizon) given.
  ResourceVector PredictAt(const PartitionView& p, int64_t trend_ns, int64_t now) const;
  void SetCapacity(PartitionView& p, const ResourceVector& capacity) const;
  void Reserve(PartitionView& p, const ResourceVector& r, double sign, int64_t now) const;

  const std::string name_;
  const EngineOptions options_;
  const admission::AdmissionLimits check_;
  const Clock& clock_;
  const double decay_ns_;

  mutable absl::Mutex mu_;
  std::vector<NodeView> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> index_ ABSL_GUARDED_BY(mu_);
  TieBreakRng rng_ ABSL_GUARDED_BY(mu_);
  PlacementStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flotilla::scheduler
