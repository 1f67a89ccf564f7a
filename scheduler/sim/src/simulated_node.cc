#include "flotilla/scheduler_sim/simulated_node.h"

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {

SimulatedNode::SimulatedNode(std::string node_id, std::vector<PartitionUsage> partitions,
                             const admission::AdmissionConfig& config)
    : id_(std::move(node_id)), ledger_(std::move(partitions), config) {}

absl::StatusOr<PlaceResult> SimulatedNode::Place(const PlaceRequest& request) {
  if (crashed()) return absl::UnavailableError(absl::StrCat("node ", id_, " is down"));
  ASSIGN_OR_RETURN(LedgerAdmitResult r, ledger_.Admit(request.sandbox_id, request.partition, request.request));
  PlaceResult out;
  out.admitted = r.admitted;
  out.reason = std::move(r.reason);
  out.usage = std::move(r.usage);
  return out;
}

absl::Status SimulatedNode::Destroy(const std::string& sandbox_id) {
  if (crashed()) return absl::UnavailableError(absl::StrCat("node ", id_, " is down"));
  return ledger_.Release(sandbox_id);
}

absl::StatusOr<NodeUsageSnapshot> SimulatedNode::Usage() {
  if (crashed()) return absl::UnavailableError(absl::StrCat("node ", id_, " is down"));
  return ledger_.Usage();
}

absl::StatusOr<std::vector<std::string>> SimulatedNode::List() {
  if (crashed()) return absl::UnavailableError(absl::StrCat("node ", id_, " is down"));
  return ledger_.SandboxIds();
}

void SimulatedNode::Crash() {
  crashed_.store(true, std::memory_order_release);
  for (const std::string& id : ledger_.SandboxIds()) (void)ledger_.Release(id);
}

}  // namespace flotilla::scheduler
