#include "flotilla/scheduler/front_door.h"

#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {

absl::StatusOr<std::unique_ptr<FrontDoor>> FrontDoor::Open(const FrontDoorOptions& options, const Clock& clock,
                                                           NodeClientFactory factory) {
  if (options.units == 0) return absl::InvalidArgumentError("units: must be at least 1");
  if (!options.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.state_dir, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("state_dir: cannot create '", options.state_dir, "': ", ec.message()));
  }
  std::unique_ptr<FrontDoor> fd(new FrontDoor(options));
  uint64_t seed = options.seed != 0 ? options.seed : RandomU64();
  for (uint32_t k = 0; k < options.units; ++k) {
    ScaleUnitOptions u = options.unit;
    u.name = absl::StrCat("unit-", k);
    u.seed = seed + 0x632be59bd9b4e019ULL * (k + 1);
    u.journal_path = options.state_dir.empty() ? "" : (std::filesystem::path(options.state_dir) / (u.name + ".db")).string();
    ASSIGN_OR_RETURN(std::unique_ptr<ScaleUnit> unit, ScaleUnit::Open(u, clock, factory, &fd->events_));
    {
      absl::MutexLock lock(&fd->mu_);
      for (const v1::NodeInfo& n : unit->ListNodes()) fd->node_unit_[n.node_id()] = k;
    }
    fd->units_.push_back(std::move(unit));
  }
  return fd;
}

size_t FrontDoor::UnitFor(const std::string& tenant) const { return absl::HashOf(tenant) % units_.size(); }

absl::StatusOr<v1::SandboxPlacement> FrontDoor::CreateSandbox(const v1::CreateSandboxRequest& request,
                                                              uint32_t* attempts) {
  const std::string& request_id = request.request_id();
  if (!request_id.empty()) {
    {
      absl::MutexLock lock(&mu_);
      if (!requests_in_flight_.insert(request_id).second) {
        return absl::AbortedError(
            absl::StrCat("request_id '", request_id, "': a request with this id is in progress; retry"));
      }
    }
    absl::Cleanup done = [&] {
      absl::MutexLock lock(&mu_);
      requests_in_flight_.erase(request_id);
    };
    for (auto& unit : units_) {
      if (auto replay = unit->Replay(request)) return *std::move(replay);
    }
    return Place(request, attempts);
  }
  return Place(request, attempts);
}

absl::StatusOr<v1::SandboxPlacement> FrontDoor::Place(const v1::CreateSandboxRequest& request, uint32_t* attempts) {
  size_t home = UnitFor(request.tenant());
  if (units_.size() > 1 && units_[home]->Fill() > options_.spill_over_fill) {
    size_t least = home;
    double least_fill = units_[home]->Fill();
    for (size_t k = 0; k < units_.size(); ++k) {
      double f = units_[k]->Fill();
      if (f < least_fill) {
        least = k;
        least_fill = f;
      }
    }
    home = least;
  }
  absl::Status last;
  for (size_t k = 0; k < units_.size(); ++k) {
    ScaleUnit& unit = *units_[(home + k) % units_.size()];
    absl::StatusOr<v1::SandboxPlacement> p = unit.CreateSandbox(request, attempts);
    if (p.ok() || !absl::IsResourceExhausted(p.status())) return p;
    last = p.status();  // full: spill over to the next unit
  }
  return absl::ResourceExhaustedError(absl::StrCat("every scale unit is full; last: ", last.message()));
}

absl::Status FrontDoor::DeleteSandbox(const std::string& sandbox_id) {
  for (auto& unit : units_) {
    absl::Status s = unit->DeleteSandbox(sandbox_id);
    if (!absl::IsNotFound(s)) return s;
  }
  return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " not found"));
}

absl::StatusOr<v1::SandboxPlacement> FrontDoor::GetSandbox(const std::string& sandbox_id) const {
  for (const auto& unit : units_) {
    absl::StatusOr<v1::SandboxPlacement> p = unit->GetSandbox(sandbox_id);
    if (!absl::IsNotFound(p.status())) return p;
  }
  return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, " not found"));
}

std::vector<v1::SandboxPlacement> FrontDoor::ListSandboxes(const v1::ListSandboxesRequest& filter) const {
  std::vector<v1::SandboxPlacement> out;
  for (const auto& unit : units_) {
    std::vector<v1::SandboxPlacement> part = unit->ListSandboxes(filter);
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return out;
}

absl::StatusOr<std::vector<v1::NodeInfo>> FrontDoor::ListNodes(const std::string& unit_name) const {
  std::vector<v1::NodeInfo> out;
  bool found = unit_name.empty();
  for (const auto& unit : units_) {
    if (!unit_name.empty() && unit->name() != unit_name) continue;
    found = true;
    std::vector<v1::NodeInfo> part = unit->ListNodes();
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  if (!found) return absl::NotFoundError(absl::StrCat("scale_unit: no unit named '", unit_name, "'"));
  return out;
}

absl::StatusOr<std::string> FrontDoor::RegisterNode(const std::string& node_id, const std::string& address,
                                                    const std::string& unit_name, const NodeUsageSnapshot& usage) {
  if (node_id.empty()) return absl::InvalidArgumentError("node_id: empty");
  if (address.empty()) return absl::InvalidArgumentError("address: empty");
  size_t k = units_.size();
  {
    absl::MutexLock lock(&mu_);
    auto it = node_unit_.find(node_id);
    if (!unit_name.empty()) {
      for (size_t i = 0; i < units_.size(); ++i) {
        if (units_[i]->name() == unit_name) k = i;
      }
      if (k == units_.size()) return absl::InvalidArgumentError(absl::StrCat("scale_unit: no unit named '", unit_name, "'"));
    } else if (it != node_unit_.end()) {
      k = it->second;
    } else {
      std::vector<size_t> counts(units_.size(), 0);
      for (const auto& [id, u] : node_unit_) ++counts[u];
      k = 0;
      for (size_t i = 1; i < counts.size(); ++i) {
        if (counts[i] < counts[k]) k = i;
      }
    }
  }
  RETURN_IF_ERROR(units_[k]->RegisterNode(node_id, address, usage));
  absl::MutexLock lock(&mu_);
  node_unit_[node_id] = k;
  return units_[k]->name();
}

absl::Status FrontDoor::AddNode(size_t unit_index, const std::string& node_id, std::shared_ptr<NodeClient> client,
                                const NodeUsageSnapshot& usage) {
  if (unit_index >= units_.size()) return absl::InvalidArgumentError(absl::StrCat("unit index ", unit_index, " out of range"));
  RETURN_IF_ERROR(units_[unit_index]->AddNode(node_id, "sim://" + node_id, std::move(client), usage));
  absl::MutexLock lock(&mu_);
  node_unit_[node_id] = unit_index;
  return absl::OkStatus();
}

ScaleUnit* FrontDoor::UnitOfNode(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = node_unit_.find(node_id);
  return it == node_unit_.end() ? nullptr : units_[it->second].get();
}

absl::StatusOr<std::vector<std::string>> FrontDoor::Heartbeat(const std::string& node_id,
                                                              const NodeUsageSnapshot& usage,
                                                              const std::vector<std::string>* sandbox_ids) {
  ScaleUnit* unit = UnitOfNode(node_id);
  if (unit == nullptr) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  return unit->Heartbeat(node_id, usage, sandbox_ids);
}

size_t FrontDoor::CheckLiveness() {
  size_t dead = 0;
  for (auto& unit : units_) dead += unit->CheckLiveness();
  return dead;
}

UnitStats FrontDoor::Stats() const {
  UnitStats total;
  for (const auto& unit : units_) {
    UnitStats s = unit->Stats();
    total.placement.placements += s.placement.placements;
    total.placement.attempts += s.placement.attempts;
    total.placement.rejections += s.placement.rejections;
    total.placement.conflicts += s.placement.conflicts;
    total.placement.node_errors += s.placement.node_errors;
    total.placement.no_capacity += s.placement.no_capacity;
    total.placement.retries += s.placement.retries;
    total.live_nodes += s.live_nodes;
    total.dead_nodes += s.dead_nodes;
    total.sandboxes += s.sandboxes;
    total.pending += s.pending;
    total.running += s.running;
    total.lost_now += s.lost_now;
    total.lost += s.lost;
  }
  return total;
}

}  // namespace flotilla::scheduler
