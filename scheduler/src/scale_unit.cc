#include "flotilla/scheduler/scale_unit.h"

#include <algorithm>
#include <limits>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {

absl::StatusOr<std::unique_ptr<ScaleUnit>> ScaleUnit::Open(const ScaleUnitOptions& options, const Clock& clock,
                                                           NodeClientFactory factory, EventBus* events) {
  if (options.replicas == 0) return absl::InvalidArgumentError("replicas: must be at least 1");
  if (options.heartbeat_timeout_ms <= 0) return absl::InvalidArgumentError("heartbeat_timeout_ms: must be positive");
  RETURN_IF_ERROR(admission::AdmissionLimits::Validate(options.engine.admission));
  std::unique_ptr<ScaleUnit> unit(new ScaleUnit(options, clock, std::move(factory), events));
  if (!options.journal_path.empty()) {
    ASSIGN_OR_RETURN(unit->journal_, Journal::Open(options.journal_path));
    RETURN_IF_ERROR(unit->Restore());
  }
  return unit;
}

ScaleUnit::ScaleUnit(const ScaleUnitOptions& options, const Clock& clock, NodeClientFactory factory,
                     EventBus* events)
    : options_(options), clock_(clock), factory_(std::move(factory)), events_(events) {
  uint64_t seed = options.seed != 0 ? options.seed : RandomU64();
  for (uint32_t i = 0; i < options.replicas; ++i) {
    replicas_.push_back(std::make_unique<PlacementEngine>(absl::StrCat(options.name, "/replica-", i), options.engine,
                                                          clock, seed + 0x9e3779b97f4a7c15ULL * (i + 1)));
  }
}

ScaleUnit::~ScaleUnit() = default;

ScaleUnit::Stripe& ScaleUnit::StripeFor(const std::string& id) const {
  // The ids this unit makes end in random characters: the last two pick the stripe without
  // hashing the whole id (any other id still lands in some stripe, only less evenly).
  const size_t n = id.size();
  const size_t mix = n >= 2 ? static_cast<unsigned char>(id[n - 1]) * 131u + static_cast<unsigned char>(id[n - 2])
                            : (n == 1 ? static_cast<unsigned char>(id[0]) : 0u);
  return stripes_[mix % kStripes];
}

namespace {

// A new sandbox id, "s-" and 64 random bits in 13 base-32 digits: 15 characters, short
// enough to live inside a std::string without a heap allocation in every table that keys on
// it (the unit's, the node handle's, the node's own). Distinct within a process (RandomU64
// is a bijection of a counter), and as unlikely to repeat across processes as any 64-bit id.
std::string NewSandboxId() {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuv";
  uint64_t v = RandomU64();
  std::string id(15, '0');
  id[0] = 's';
  id[1] = '-';
  for (size_t i = 14; i >= 2; --i) {
    id[i] = kDigits[v & 31];
    v >>= 5;
  }
  return id;
}

}  // namespace

absl::Status ScaleUnit::Restore() {
  ASSIGN_OR_RETURN(std::vector<NodeRecord> nodes, journal_->LoadNodes());
  const int64_t now = clock_.NowNanos();
  {
    absl::MutexLock lock(&nodes_mu_);
    for (const NodeRecord& n : nodes) {
      auto handle = std::make_shared<NodeHandle>();
      handle->id = n.id;
      handle->address = n.address;
      if (factory_) {
        ASSIGN_OR_RETURN(handle->client, factory_(n.id, n.address));
      }
      nodes_[n.id] = NodeState{handle, now, /*in_views=*/false};
    }
  }
  ASSIGN_OR_RETURN(std::vector<SandboxRecord> records, journal_->LoadSandboxes());
  size_t restored = 0;
  for (SandboxRecord& r : records) {
    const v1::SandboxPlacement& p = r.placement;
    if (!r.request_id.empty()) {
      // Every acknowledged request id, deleted sandboxes' too: a late retry must not place again.
      absl::MutexLock lock(&requests_mu_);
      requests_[r.request_id] = RequestRecord{p.sandbox_id(), r.request_fingerprint};
    }
    bool live = p.state() == v1::SandboxPlacement::RUNNING || p.state() == v1::SandboxPlacement::PENDING;
    if (!live && p.state() != v1::SandboxPlacement::LOST) continue;
    Entry e;
    e.tenant = r.tenant;
    e.node_id = p.node_id();
    e.partition = p.numa_partition();
    e.request = r.request;
    e.execution_class = r.execution_class;
    e.state = p.state();
    e.reason = p.lost_reason();
    for (const auto& [k, v] : p.labels()) e.labels.emplace_back(k, v);
    e.created_unix_ms = p.created_unix_ms();
    e.placed_ns = std::numeric_limits<int64_t>::min() / 4;  // long before any heartbeat
    if (live) {
      absl::MutexLock lock(&nodes_mu_);
      auto it = nodes_.find(e.node_id);
      if (it != nodes_.end()) {
        e.node = it->second.handle;
        e.node->sandboxes.fetch_add(1, std::memory_order_relaxed);
        if (e.execution_class == v1::LATENCY_SENSITIVE) e.node->latency_sensitive.fetch_add(1);
        used_slots_.fetch_add(e.request.slots, std::memory_order_relaxed);
        absl::MutexLock nl(&e.node->mu);
        e.node->sandbox_ids.insert(p.sandbox_id());
      }
    }
    Stripe& s = StripeFor(p.sandbox_id());
    absl::MutexLock lock(&s.mu);
    s.map[p.sandbox_id()] = std::move(e);
    ++restored;
  }
  FLOG(info, "scale unit restored from journal",
       {{"unit", options_.name}, {"nodes", nodes.size()}, {"sandboxes", restored}});
  return absl::OkStatus();
}

absl::Status ScaleUnit::AddNode(const std::string& node_id, const std::string& address,
                                std::shared_ptr<NodeClient> client, const NodeUsageSnapshot& usage) {
  if (node_id.empty()) return absl::InvalidArgumentError("node_id: empty");
  if (usage.partitions.empty()) return absl::InvalidArgumentError(absl::StrCat("node ", node_id, ": usage has no capacity"));
  std::shared_ptr<NodeHandle> handle;
  {
    absl::MutexLock lock(&nodes_mu_);
    auto it = nodes_.find(node_id);
    if (it != nodes_.end() && it->second.handle->address == address && it->second.handle->alive.load()) {
      handle = it->second.handle;  // a restart of the same agent, or a restored node: keep its sandboxes
      if (client) handle->client = std::move(client);
    } else {
      handle = std::make_shared<NodeHandle>();
      handle->id = node_id;
      handle->address = address;
      handle->client = std::move(client);
    }
    handle->slots_capacity.store(usage.TotalCapacity().slots);
    nodes_[node_id] = NodeState{handle, clock_.NowNanos(), /*in_views=*/true};
    RecountCapacity();
  }
  if (journal_ != nullptr) RETURN_IF_ERROR(journal_->RecordNode({node_id, address}));
  for (auto& r : replicas_) r->AddNode(handle, usage);
  return absl::OkStatus();
}

absl::Status ScaleUnit::RegisterNode(const std::string& node_id, const std::string& address,
                                     const NodeUsageSnapshot& usage) {
  if (!factory_) return absl::FailedPreconditionError(absl::StrCat(options_.name, ": no node client factory"));
  ASSIGN_OR_RETURN(std::shared_ptr<NodeClient> client, factory_(node_id, address));
  return AddNode(node_id, address, std::move(client), usage);
}

absl::StatusOr<std::vector<std::string>> ScaleUnit::Heartbeat(const std::string& node_id,
                                                              const NodeUsageSnapshot& usage,
                                                              const std::vector<std::string>* sandbox_ids) {
  std::shared_ptr<NodeHandle> handle;
  bool join_views = false;
  {
    absl::MutexLock lock(&nodes_mu_);
    auto it = nodes_.find(node_id);
    if (it == nodes_.end() || !it->second.handle->alive.load()) {
      return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered with ", options_.name));
    }
    it->second.last_heartbeat_ns = clock_.NowNanos();
    handle = it->second.handle;
    join_views = !it->second.in_views;
    it->second.in_views = true;
    if (join_views) {
      handle->slots_capacity.store(usage.TotalCapacity().slots);
      RecountCapacity();
    }
  }
  for (auto& r : replicas_) {
    if (join_views) {
      r->AddNode(handle, usage);
    } else {
      r->OnReport(node_id, usage);
    }
  }
  std::vector<std::string> unknown;
  if (sandbox_ids == nullptr) return unknown;

  absl::flat_hash_set<std::string> on_node(sandbox_ids->begin(), sandbox_ids->end());
  for (const std::string& id : *sandbox_ids) {
    Stripe& s = StripeFor(id);
    absl::MutexLock lock(&s.mu);
    auto it = s.map.find(id);
    // A PENDING entry is being placed right now (maybe on this node): not unknown.
    if (it == s.map.end() || it->second.state == v1::SandboxPlacement::LOST ||
        (it->second.state != v1::SandboxPlacement::PENDING && it->second.node_id != node_id)) {
      unknown.push_back(id);
    }
  }
  std::vector<std::string> missing;
  const int64_t grace_ns = options_.reconcile_grace_ms * 1'000'000;
  const int64_t now = clock_.NowNanos();
  {
    absl::MutexLock lock(&handle->mu);
    for (const std::string& id : handle->sandbox_ids) {
      if (!on_node.contains(id)) missing.push_back(id);
    }
  }
  for (const std::string& id : missing) {
    bool old_enough = false;
    {
      Stripe& s = StripeFor(id);
      absl::MutexLock lock(&s.mu);
      auto it = s.map.find(id);
      old_enough = it != s.map.end() && it->second.state == v1::SandboxPlacement::RUNNING &&
                   now - it->second.placed_ns >= grace_ns;
    }
    if (old_enough) MarkLost(id, v1::SANDBOX_DIED, absl::StrCat("node ", node_id, " no longer has the sandbox"));
  }
  return unknown;
}

size_t ScaleUnit::CheckLiveness() {
  const int64_t now = clock_.NowNanos();
  const int64_t timeout_ns = options_.heartbeat_timeout_ms * 1'000'000;
  std::vector<std::pair<std::shared_ptr<NodeHandle>, int64_t>> dead;
  {
    absl::MutexLock lock(&nodes_mu_);
    for (auto& [id, st] : nodes_) {
      if (st.handle->alive.load() && now - st.last_heartbeat_ns > timeout_ns) {
        st.handle->alive.store(false);
        dead.emplace_back(st.handle, (now - st.last_heartbeat_ns) / 1'000'000);
        ++dead_nodes_;
      }
    }
    if (!dead.empty()) RecountCapacity();
  }
  for (auto& [node, silent_ms] : dead) {
    KillNode(node, absl::StrCat("node ", node->id, " silent for ", silent_ms, " ms"));
  }
  return dead.size();
}

void ScaleUnit::KillNode(const std::shared_ptr<NodeHandle>& node, const std::string& detail) {
  FLOG(warn, "node declared dead", {{"unit", options_.name}, {"node", node->id}, {"detail", detail}});
  for (auto& r : replicas_) r->RemoveNode(node->id);
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&node->mu);
    ids.assign(node->sandbox_ids.begin(), node->sandbox_ids.end());
  }
  for (const std::string& id : ids) MarkLost(id, v1::NODE_LOST, detail);
}

void ScaleUnit::MarkLost(const std::string& id, v1::StopReason reason, const std::string& detail) {
  Entry copy;
  {
    Stripe& s = StripeFor(id);
    absl::MutexLock lock(&s.mu);
    auto it = s.map.find(id);
    if (it == s.map.end() || it->second.state == v1::SandboxPlacement::LOST) return;
    it->second.state = v1::SandboxPlacement::LOST;
    it->second.reason = reason;
    copy = it->second;
  }
  if (journal_ != nullptr) {
    absl::Status st = journal_->RecordState(id, v1::SandboxPlacement::LOST, reason);
    if (!st.ok()) FLOG(error, "journal write failed", {{"sandbox", id}, {"error", std::string(st.message())}});
  }
  if (copy.node != nullptr) {
    copy.node->sandboxes.fetch_sub(1, std::memory_order_relaxed);
    if (copy.execution_class == v1::LATENCY_SENSITIVE) copy.node->latency_sensitive.fetch_sub(1);
    absl::MutexLock lock(&copy.node->mu);
    copy.node->sandbox_ids.erase(id);
  }
  lost_.fetch_add(1, std::memory_order_relaxed);
  if (copy.node != nullptr) used_slots_.fetch_sub(copy.request.slots, std::memory_order_relaxed);
  Publish(id, copy, v1::SandboxEvent::LOST, detail);
}

v1::SandboxPlacement ScaleUnit::ToPlacement(const std::string& id, const Entry& e) const {
  v1::SandboxPlacement p;
  p.set_sandbox_id(id);
  p.set_node_id(e.node_id);
  if (e.node != nullptr) p.set_node_address(e.node->address);
  p.set_scale_unit(options_.name);
  p.set_numa_partition(e.partition);
  p.set_state(e.state);
  p.set_lost_reason(e.reason);
  for (const auto& [k, v] : e.labels) (*p.mutable_labels())[k] = v;
  p.set_created_unix_ms(e.created_unix_ms);
  p.set_execution_class(e.execution_class);
  return p;
}

void ScaleUnit::Publish(const std::string& id, const Entry& e, v1::SandboxEvent::Kind kind,
                        const std::string& detail) {
  if (events_ == nullptr || !events_->has_subscribers()) return;
  v1::SchedulerEvent ev;
  *ev.mutable_placement() = ToPlacement(id, e);
  (*ev.mutable_placement()->mutable_labels())["tenant"] = e.tenant;
  ev.set_kind(kind);
  ev.set_detail(detail);
  events_->Publish(ev);
}

absl::StatusOr<v1::SandboxPlacement> ScaleUnit::CreateSandbox(const v1::CreateSandboxRequest& request,
                                                              uint32_t* attempts) {
  const std::string& request_id = request.request_id();
  const uint64_t fingerprint = request_id.empty() ? 0 : RequestFingerprint(request);
  if (!request_id.empty()) {
    RequestRecord seen;
    bool first = false;
    {
      absl::MutexLock lock(&requests_mu_);
      auto [it, inserted] = requests_.try_emplace(request_id, RequestRecord{"", fingerprint});
      first = inserted;
      if (!inserted) seen = it->second;
    }
    if (!first) return ReplayRecord(request_id, seen, fingerprint);
  }
  // Until acknowledged, a failure frees the request id for a retry.
  bool acknowledged = false;
  absl::Cleanup release_request = [&] {
    if (request_id.empty() || acknowledged) return;
    absl::MutexLock lock(&requests_mu_);
    requests_.erase(request_id);
  };
  const std::string id = NewSandboxId();
  Entry e;
  e.tenant = request.tenant();
  e.request = admission::AdmissionLimits(options_.engine.admission).RequestOf(request.resources());
  e.execution_class = request.execution_class() == v1::LATENCY_SENSITIVE ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT;
  for (const auto& [k, v] : request.labels()) e.labels.emplace_back(k, v);
  e.placed_ns = clock_.NowNanos();
  Stripe& stripe = StripeFor(id);
  {
    // Known (PENDING) before the node hears of it, so a heartbeat never calls it unknown.
    absl::MutexLock lock(&stripe.mu);
    stripe.map.emplace(id, e);
  }
  PlaceRequest place;
  place.sandbox_id = id;
  place.request = e.request;
  place.execution_class = e.execution_class;
  place.spec = &request;
  PlacementEngine& engine = *replicas_[next_replica_.fetch_add(1, std::memory_order_relaxed) % replicas_.size()];
  absl::StatusOr<Placement> placed = engine.Place(std::move(place));
  if (!placed.ok()) {
    absl::MutexLock lock(&stripe.mu);
    stripe.map.erase(id);
    return placed.status();
  }
  if (attempts != nullptr) *attempts = placed->attempts;
  e.node = std::move(placed->node);
  e.node_id = e.node->id;
  e.partition = placed->partition;
  e.state = v1::SandboxPlacement::RUNNING;
  e.created_unix_ms = clock_.WallMillis();
  e.node->sandboxes.fetch_add(1, std::memory_order_relaxed);
  if (e.execution_class == v1::LATENCY_SENSITIVE) e.node->latency_sensitive.fetch_add(1, std::memory_order_relaxed);
  used_slots_.fetch_add(e.request.slots, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&e.node->mu);
    e.node->sandbox_ids.insert(id);
  }
  if (journal_ != nullptr) {
    SandboxRecord record;
    record.placement = ToPlacement(id, e);
    record.tenant = e.tenant;
    record.request = e.request;
    record.execution_class = e.execution_class;
    record.request_id = request_id;
    record.request_fingerprint = fingerprint;
    absl::Status st = journal_->RecordSandbox(record);
    if (!st.ok()) {
      // Not acknowledged: undo on the node so nothing runs that the journal does not know.
      (void)e.node->client->Destroy(id);
      Forget(id, e);
      return Annotate(st, "journal");
    }
  }
  v1::SandboxPlacement out = ToPlacement(id, e);
  {
    absl::MutexLock lock(&stripe.mu);
    auto it = stripe.map.find(id);
    if (it != stripe.map.end() && it->second.state == v1::SandboxPlacement::PENDING) {
      Entry& stored = it->second;
      stored.node = e.node;
      stored.node_id = e.node_id;
      stored.partition = e.partition;
      stored.state = e.state;
      stored.created_unix_ms = e.created_unix_ms;
    }
  }
  if (!request_id.empty()) {
    absl::MutexLock lock(&requests_mu_);
    requests_[request_id] = RequestRecord{id, fingerprint};
    acknowledged = true;
  }
  latency_.Record(clock_.NowNanos() - e.placed_ns);
  Publish(id, e, v1::SandboxEvent::CREATED, "");
  return out;
}

void ScaleUnit::Forget(const std::string& id, const Entry& e) {
  if (e.node != nullptr) {
    used_slots_.fetch_sub(e.request.slots, std::memory_order_relaxed);
    e.node->sandboxes.fetch_sub(1, std::memory_order_relaxed);
    if (e.execution_class == v1::LATENCY_SENSITIVE) e.node->latency_sensitive.fetch_sub(1, std::memory_order_relaxed);
    absl::MutexLock lock(&e.node->mu);
    e.node->sandbox_ids.erase(id);
  }
  Stripe& s = StripeFor(id);
  absl::MutexLock lock(&s.mu);
  s.map.erase(id);
}

absl::Status ScaleUnit::DeleteSandbox(const std::string& sandbox_id) {
  Entry e;
  {
    Stripe& s = StripeFor(sandbox_id);
    absl::MutexLock lock(&s.mu);
    auto it = s.map.find(sandbox_id);
    if (it == s.map.end()) return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " not found"));
    if (it->second.state == v1::SandboxPlacement::PENDING) {
      return absl::FailedPreconditionError(absl::StrCat("sandbox ", sandbox_id, " is still being placed"));
    }
    e = it->second;
  }
  if (e.state == v1::SandboxPlacement::RUNNING && e.node != nullptr && e.node->alive.load()) {
    absl::Status st = e.node->client->Destroy(sandbox_id);
    if (!st.ok() && !absl::IsNotFound(st)) return Annotate(st, absl::StrCat("node ", e.node_id));
  }
  if (journal_ != nullptr) {
    RETURN_IF_ERROR(journal_->RecordState(sandbox_id, v1::SandboxPlacement::DELETED, v1::DESTROYED));
  }
  if (e.state == v1::SandboxPlacement::LOST) e.node = nullptr;  // its counters went with the loss
  Forget(sandbox_id, e);
  e.state = v1::SandboxPlacement::DELETED;
  Publish(sandbox_id, e, v1::SandboxEvent::DESTROYED, "");
  return absl::OkStatus();
}

absl::StatusOr<v1::SandboxPlacement> ScaleUnit::GetSandbox(const std::string& sandbox_id) const {
  Stripe& s = StripeFor(sandbox_id);
  absl::MutexLock lock(&s.mu);
  auto it = s.map.find(sandbox_id);
  if (it == s.map.end()) return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " not found"));
  return ToPlacement(it->first, it->second);
}

std::vector<v1::SandboxPlacement> ScaleUnit::ListSandboxes(const v1::ListSandboxesRequest& filter) const {
  std::vector<v1::SandboxPlacement> out;
  for (Stripe& s : stripes_) {
    absl::MutexLock lock(&s.mu);
    for (const auto& [id, e] : s.map) {
      if (!filter.tenant().empty() && e.tenant != filter.tenant()) continue;
      if (!filter.node_id().empty() && e.node_id != filter.node_id()) continue;
      bool match = true;
      for (const auto& [k, v] : filter.label_selector()) {
        bool found = false;
        for (const auto& [lk, lv] : e.labels) found = found || (lk == k && lv == v);
        match = match && found;
      }
      if (match) out.push_back(ToPlacement(id, e));
    }
  }
  return out;
}

void ScaleUnit::RecountCapacity() {
  int64_t total = 0;
  for (const auto& [id, st] : nodes_) {
    if (st.handle->alive.load() && st.in_views) total += st.handle->slots_capacity.load();
  }
  capacity_slots_.store(total, std::memory_order_relaxed);
}

double ScaleUnit::Fill() const {
  int64_t cap = capacity_slots_.load(std::memory_order_relaxed);
  if (cap <= 0) return 1.0;
  return static_cast<double>(used_slots_.load(std::memory_order_relaxed)) / static_cast<double>(cap);
}

bool ScaleUnit::HasNode(const std::string& node_id) const {
  absl::MutexLock lock(&nodes_mu_);
  return nodes_.contains(node_id);
}

std::vector<v1::NodeInfo> ScaleUnit::ListNodes() const {
  std::vector<v1::NodeInfo> out;
  {
    absl::MutexLock lock(&nodes_mu_);
    for (const auto& [id, st] : nodes_) {
      v1::NodeInfo& n = out.emplace_back();
      n.set_node_id(id);
      n.set_address(st.handle->address);
      n.set_scale_unit(options_.name);
      n.set_alive(st.handle->alive.load());
      n.set_sandboxes(st.handle->sandboxes.load());
      n.set_slots_capacity(st.handle->slots_capacity.load());
    }
  }
  std::sort(out.begin(), out.end(), [](const v1::NodeInfo& a, const v1::NodeInfo& b) { return a.node_id() < b.node_id(); });
  return out;
}

UnitStats ScaleUnit::Stats() const {
  UnitStats out;
  for (const auto& r : replicas_) {
    PlacementStats s = r->stats();
    out.placement.placements += s.placements;
    out.placement.attempts += s.attempts;
    out.placement.rejections += s.rejections;
    out.placement.conflicts += s.conflicts;
    out.placement.node_errors += s.node_errors;
    out.placement.no_capacity += s.no_capacity;
    out.placement.retries += s.retries;
  }
  {
    absl::MutexLock lock(&nodes_mu_);
    for (const auto& [id, st] : nodes_) {
      if (st.handle->alive.load()) {
        ++out.live_nodes;
      }
    }
    out.dead_nodes = dead_nodes_;
  }
  for (Stripe& s : stripes_) {
    absl::MutexLock lock(&s.mu);
    out.sandboxes += s.map.size();
    for (const auto& [id, e] : s.map) {
      if (e.state == v1::SandboxPlacement::PENDING) ++out.pending;
      if (e.state == v1::SandboxPlacement::RUNNING) ++out.running;
      if (e.state == v1::SandboxPlacement::LOST) ++out.lost_now;
    }
  }
  out.lost = lost_.load();
  return out;
}

}  // namespace flotilla::scheduler
