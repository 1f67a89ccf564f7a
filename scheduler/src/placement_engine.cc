#include "flotilla/scheduler/placement_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {
namespace {

uint64_t AddSigned(uint64_t base, double delta) {
  double v = static_cast<double>(base) + delta;
  return v <= 0 ? 0 : static_cast<uint64_t>(v + 0.5);
}

}  // namespace

PlacementEngine::PlacementEngine(std::string name, const EngineOptions& options, const Clock& clock, uint64_t seed)
    : name_(std::move(name)),
      options_(options),
      check_(options.admission),
      clock_(clock),
      decay_ns_(static_cast<double>(std::max<int64_t>(options.reservation_decay_ms, 1)) * 1e6),
      rng_(seed) {}

void PlacementEngine::SetCapacity(PartitionView& p, const ResourceVector& capacity) const {
  p.capacity = capacity;
  p.limits = check_.Limits(capacity);
  p.inv_slot_limit = p.limits.slots > 0 ? 1.0 / static_cast<double>(p.limits.slots) : 0.0;
  p.inv_memory_limit = p.limits.memory_bytes > 0 ? 1.0 / static_cast<double>(p.limits.memory_bytes) : 0.0;
}

void PlacementEngine::ApplyUsage(NodeView& v, const NodeUsageSnapshot& usage, int64_t now, bool heartbeat) {
  if (v.partitions.size() != usage.partitions.size()) {
    // The node's shape changed (or this is its first report): start its view afresh.
    v.partitions.assign(usage.partitions.size(), PartitionView{});
    v.report_ns = 0;
    for (size_t i = 0; i < usage.partitions.size(); ++i) SetCapacity(v.partitions[i], usage.partitions[i].capacity);
  }
  for (size_t i = 0; i < usage.partitions.size(); ++i) {
    PartitionView& p = v.partitions[i];
    const PartitionUsage& u = usage.partitions[i];
    if (!(p.capacity == u.capacity)) SetCapacity(p, u.capacity);
    p.base = u.used;
    if (heartbeat) {
      if (v.report_ns > 0 && now > v.report_ns) {
        double dt = static_cast<double>(now - v.report_ns);
        p.slots_per_ns = (static_cast<double>(u.used.slots) - static_cast<double>(p.last_report.slots)) / dt;
        p.memory_per_ns =
            (static_cast<double>(u.used.memory_bytes) - static_cast<double>(p.last_report.memory_bytes)) / dt;
      }
      p.last_report = u.used;
    }
  }
  v.base_ns = now;
  if (heartbeat) v.report_ns = now;
  const uint32_t total = v.node->sandboxes.load(std::memory_order_relaxed);
  v.ls_share = total == 0 ? 0.0
                          : static_cast<double>(v.node->latency_sensitive.load(std::memory_order_relaxed)) /
                                static_cast<double>(total);
}

ResourceVector PlacementEngine::Predict(const NodeView& v, const PartitionView& p, int64_t now) const {
  return PredictAt(p, std::min<int64_t>(now - v.base_ns, options_.trend_horizon_ms * 1'000'000), now);
}

// Inlined into the choice loop, which calls it for every partition of the view.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline ResourceVector PlacementEngine::PredictAt(const PartitionView& p,
                                                                              int64_t trend_ns, int64_t now) const {
  ResourceVector out = p.base;
  double slots_delta = 0, memory_delta = 0, cpu_delta = 0;
  if (trend_ns > 0 && (p.slots_per_ns != 0 || p.memory_per_ns != 0)) {
    slots_delta += p.slots_per_ns * static_cast<double>(trend_ns);
    memory_delta += p.memory_per_ns * static_cast<double>(trend_ns);
  }
  if (p.reserved_slots > 0 || p.reserved_memory > 0 || p.reserved_cpu > 0) {
    double f = std::exp(-static_cast<double>(now - p.reserved_ns) / decay_ns_);
    slots_delta += p.reserved_slots * f;
    memory_delta += p.reserved_memory * f;
    cpu_delta += p.reserved_cpu * f;
  }
  if (slots_delta != 0 || memory_delta != 0 || cpu_delta != 0) {
    out.slots = static_cast<uint32_t>(AddSigned(out.slots, slots_delta));
    out.memory_bytes = AddSigned(out.memory_bytes, memory_delta);
    out.cpu_millicores = static_cast<uint32_t>(AddSigned(out.cpu_millicores, cpu_delta));
  }
  return out;
}

void PlacementEngine::Reserve(PartitionView& p, const ResourceVector& r, double sign, int64_t now) const {
  double f = std::exp(-static_cast<double>(now - p.reserved_ns) / decay_ns_);
  p.reserved_slots = std::max(0.0, p.reserved_slots * f + sign * r.slots);
  p.reserved_memory = std::max(0.0, p.reserved_memory * f + sign * static_cast<double>(r.memory_bytes));
  p.reserved_cpu = std::max(0.0, p.reserved_cpu * f + sign * r.cpu_millicores);
  // Below one slot's worth the reservation has decayed away: drop the remainder.
  if (p.reserved_slots < 0.5) p.reserved_slots = p.reserved_memory = p.reserved_cpu = 0;
  p.reserved_ns = now;
}

void PlacementEngine::AddNode(std::shared_ptr<NodeHandle> node, const NodeUsageSnapshot& usage) {
  absl::MutexLock lock(&mu_);
  int64_t now = clock_.NowNanos();
  auto it = index_.find(node->id);
  if (it != index_.end()) {
    NodeView& v = nodes_[it->second];
    v.node = std::move(node);
    ApplyUsage(v, usage, now, /*heartbeat=*/true);
    return;
  }
  NodeView v;
  v.node = std::move(node);
  ApplyUsage(v, usage, now, /*heartbeat=*/true);
  index_.emplace(v.node->id, nodes_.size());
  nodes_.push_back(std::move(v));
}

void PlacementEngine::RemoveNode(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(node_id);
  if (it == index_.end()) return;
  size_t i = it->second;
  index_.erase(it);
  if (i + 1 != nodes_.size()) {
    nodes_[i] = std::move(nodes_.back());
    index_[nodes_[i].node->id] = i;
  }
  nodes_.pop_back();
}

void PlacementEngine::OnReport(const std::string& node_id, const NodeUsageSnapshot& usage) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(node_id);
  if (it == index_.end()) return;
  ApplyUsage(nodes_[it->second], usage, clock_.NowNanos(), /*heartbeat=*/true);
}

absl::StatusOr<PlacementEngine::Choice> PlacementEngine::Choose(const ResourceVector& request,
                                                                 v1::ExecutionClass cls) {
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_.NowNanos();
  const size_t n = nodes_.size();
  if (n == 0) {
    ++stats_.no_capacity;
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": no live nodes"));
  }
  const bool ls = cls == v1::LATENCY_SENSITIVE;
  const bool best_fit = options_.fit == FitPolicy::kBestFit;
  const double jitter_scale = options_.tie_break * 0x1.0p-53;
  size_t start = static_cast<size_t>(rng_() % n);
  double best_score = -1e300;
  size_t best_node = n;
  uint32_t best_part = 0;
  ResourceVector best_pred;
  uint32_t feasible = 0;
  const int64_t horizon_ns = options_.trend_horizon_ms * 1'000'000;
  for (size_t k = 0; k < n; ++k) {
    size_t i = start + k;
    if (i >= n) i -= n;
    const NodeView& v = nodes_[i];
    if (v.suspect_until_ns > now) continue;
    // Latency-sensitive sandboxes go where few others are; best-effort ones fill in beside them.
    const double class_score = ls ? 1.0 - v.ls_share : v.ls_share;
    const int64_t trend_ns = std::min<int64_t>(now - v.base_ns, horizon_ns);
    bool node_feasible = false;
    for (uint32_t pi = 0; pi < v.partitions.size(); ++pi) {
      const PartitionView& p = v.partitions[pi];
      ResourceVector pred = PredictAt(p, trend_ns, now);
      if (check_.CheckLimits(p.limits, pred, request) != admission::AdmissionVerdict::kAdmitted) continue;
      node_feasible = true;
      double slot_frac = static_cast<double>(pred.slots + request.slots) * p.inv_slot_limit;
      double mem_frac = static_cast<double>(pred.memory_bytes + request.memory_bytes) * p.inv_memory_limit;
      double util = std::max(slot_frac, mem_frac);
      double fit = best_fit ? util : 1.0 - util;
      double partition_fit = 1.0 - std::fabs(slot_frac - mem_frac);
      double score = options_.fit_weight * fit + options_.partition_weight * partition_fit +
                     options_.class_mix_weight * class_score;
      // The random tie-break can only matter within tie_break of the best so far.
      if (score + options_.tie_break <= best_score) continue;
      score += static_cast<double>(rng_() >> 11) * jitter_scale;
      if (score > best_score) {
        best_score = score;
        best_node = i;
        best_part = pi;
        best_pred = pred;
      }
    }
    if (node_feasible && options_.candidate_sample != 0 && ++feasible >= options_.candidate_sample) break;
  }
  if (best_node == n) {
    ++stats_.no_capacity;
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": no node has room for the request in this replica's view"));
  }
  NodeView& v = nodes_[best_node];
  Reserve(v.partitions[best_part], request, +1.0, now);
  return Choice{v.node, best_part, best_pred};
}

bool PlacementEngine::Settle(const Choice& choice, const ResourceVector& request,
                             const absl::StatusOr<PlaceResult>& result) {
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_.NowNanos();
  ++stats_.attempts;
  auto it = index_.find(choice.node->id);
  NodeView* v = it == index_.end() ? nullptr : &nodes_[it->second];
  if (v != nullptr && choice.partition < v->partitions.size()) {
    Reserve(v->partitions[choice.partition], request, -1.0, now);
  }
  if (!result.ok()) {
    ++stats_.node_errors;
    if (v != nullptr) v->suspect_until_ns = now + options_.suspect_ms * 1'000'000;
    return false;
  }
  bool conflict = false;
  if (result->admitted) {
    ++stats_.placements;
    if (choice.partition < result->usage.partitions.size()) {
      ResourceVector before = result->usage.partitions[choice.partition].used;
      before -= request;
      conflict = before.slots != choice.predicted_used.slots;
    }
  } else {
    ++stats_.rejections;
    conflict = true;
  }
  if (conflict) ++stats_.conflicts;
  if (v != nullptr) ApplyUsage(*v, result->usage, now, /*heartbeat=*/false);
  return conflict;
}

absl::StatusOr<Placement> PlacementEngine::Place(PlaceRequest request) {
  absl::Status last = absl::ResourceExhaustedError("no attempt made");
  for (uint32_t attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      uint64_t wait_us = 0;
      {
        absl::MutexLock lock(&mu_);
        ++stats_.retries;
        if (options_.retry_backoff_us > 0) {
          wait_us = rng_() % (uint64_t{options_.retry_backoff_us} << std::min<uint32_t>(attempt - 1, 10));
        }
      }
      if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
    }
    ASSIGN_OR_RETURN(Choice choice, Choose(request.request, request.execution_class));
    request.partition = choice.partition;
    absl::StatusOr<PlaceResult> result = choice.node->client->Place(request);
    Settle(choice, request.request, result);
    if (!result.ok()) {
      last = Annotate(result.status(), absl::StrCat("node ", choice.node->id));
      continue;
    }
    if (result->admitted) return Placement{std::move(choice.node), choice.partition, attempt + 1};
    last = absl::ResourceExhaustedError(absl::StrCat("node ", choice.node->id, " rejected: ", result->reason));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(name_, ": gave up after ", options_.max_attempts, " attempts; last: ", last.message()));
}

absl::StatusOr<ResourceVector> PlacementEngine::PredictedUsage(const std::string& node_id, uint32_t partition) const {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(node_id);
  if (it == index_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not in ", name_, "'s view"));
  const NodeView& v = nodes_[it->second];
  if (partition >= v.partitions.size()) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, " has no partition ", partition));
  }
  return Predict(v, v.partitions[partition], clock_.NowNanos());
}

PlacementStats PlacementEngine::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t PlacementEngine::node_count() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

}  // namespace flotilla::scheduler
