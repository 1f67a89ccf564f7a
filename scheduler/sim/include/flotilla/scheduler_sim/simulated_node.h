// A node without a kernel: a NodeLedger (the node agent's own admission and accounting)
// behind the NodeClient seam, for the simulator and tests. Thread-safe.
#pragma once

#include <atomic>
#include <string>

#include "flotilla/scheduler/node_client.h"
#include "flotilla/scheduler_sim/node_ledger.h"

namespace flotilla::scheduler {

class SimulatedNode final : public NodeClient {
 public:
  SimulatedNode(std::string node_id, std::vector<PartitionUsage> partitions, const admission::AdmissionConfig& config);

  absl::StatusOr<PlaceResult> Place(const PlaceRequest& request) override;
  absl::Status Destroy(const std::string& sandbox_id) override;
  absl::StatusOr<NodeUsageSnapshot> Usage() override;
  absl::StatusOr<std::vector<std::string>> List() override;

  // Failure injection: a crashed node answers Unavailable and loses its sandboxes.
  void Crash();
  [[nodiscard]] bool crashed() const { return crashed_.load(std::memory_order_acquire); }
  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] NodeLedger& ledger() { return ledger_; }

 private:
  const std::string id_;
  NodeLedger ledger_;
  std::atomic<bool> crashed_{false};
};

}  // namespace flotilla::scheduler
