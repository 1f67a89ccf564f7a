// The scheduler's front door: owns the scale units, routes each request to a unit by tenant
// (experiment) with spill-over to the next unit when one is full, routes node traffic to the
// unit that owns the node, and fans events out to watchers.
//
// Thread-safe. Owns its units and its EventBus.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/scheduler/event_bus.h"
#include "flotilla/scheduler/scale_unit.h"

namespace flotilla::scheduler {

struct FrontDoorOptions {
  uint32_t units = 1;
  // Template for every unit; name, seed and journal_path are set per unit.
  ScaleUnitOptions unit;
  // Directory for the units' journals (unit-<k>.db); empty: no journals.
  std::string state_dir;
  uint64_t seed = 0;  // 0: random
  // A tenant's home unit filled past this share of its slots sends new sandboxes to the
  // least-filled unit first (and any unit that is full spills over to the next).
  double spill_over_fill = 0.95;
};

class FrontDoor {
 public:
  static absl::StatusOr<std::unique_ptr<FrontDoor>> Open(const FrontDoorOptions& options, const Clock& clock,
                                                         NodeClientFactory factory);
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  // Places a sandbox in the tenant's unit (or the next with room). With a request_id, a
  // request any unit has acknowledged before is answered as ScaleUnit::Replay answers it,
  // whichever unit placed it; Aborted while another call with the same id is in progress.
  absl::StatusOr<v1::SandboxPlacement> CreateSandbox(const v1::CreateSandboxRequest& request,
                                                     uint32_t* attempts = nullptr);
  absl::Status DeleteSandbox(const std::string& sandbox_id);
  absl::StatusOr<v1::SandboxPlacement> GetSandbox(const std::string& sandbox_id) const;
  std::vector<v1::SandboxPlacement> ListSandboxes(const v1::ListSandboxesRequest& filter) const;
  // The nodes of one unit (by name) or, with an empty name, of every unit, idle ones too.
  absl::StatusOr<std::vector<v1::NodeInfo>> ListNodes(const std::string& unit_name) const;

  // Registers a node by address in `unit_name` (empty: the unit with the fewest nodes).
  // Returns the unit's name. InvalidArgument naming scale_unit when there is no such unit.
  absl::StatusOr<std::string> RegisterNode(const std::string& node_id, const std::string& address,
                                           const std::string& unit_name, const NodeUsageSnapshot& usage);
  // Adds a node with its client to unit `unit_index` (the simulator's way in).
  absl::Status AddNode(size_t unit_index, const std::string& node_id, std::shared_ptr<NodeClient> client,
                       const NodeUsageSnapshot& usage);
  absl::StatusOr<std::vector<std::string>> Heartbeat(const std::string& node_id, const NodeUsageSnapshot& usage,
                                                     const std::vector<std::string>* sandbox_ids);
  // Runs every unit's liveness check; returns the number of nodes declared dead.
  size_t CheckLiveness();

  [[nodiscard]] EventBus& events() { return events_; }
  [[nodiscard]] size_t unit_count() const { return units_.size(); }
  [[nodiscard]] ScaleUnit& unit(size_t i) { return *units_[i]; }
  [[nodiscard]] size_t UnitFor(const std::string& tenant) const;
  [[nodiscard]] UnitStats Stats() const;
  [[nodiscard]] const FrontDoorOptions& options() const { return options_; }

 private:
  FrontDoor(const FrontDoorOptions& options) : options_(options) {}
  ScaleUnit* UnitOfNode(const std::string& node_id) const;
  absl::StatusOr<v1::SandboxPlacement> Place(const v1::CreateSandboxRequest& request, uint32_t* attempts);

  const FrontDoorOptions options_;
  EventBus events_;
  std::vector<std::unique_ptr<ScaleUnit>> units_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, size_t> node_unit_ ABSL_GUARDED_BY(mu_);
  // Request ids of CreateSandbox calls in progress (units may differ between two calls).
  absl::flat_hash_set<std::string> requests_in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flotilla::scheduler
