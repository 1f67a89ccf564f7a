// RunSchedulerLink: the node agent driving a SchedulerLink (registration and heartbeats).
#include <chrono>
#include <thread>

#include "flotilla/node/node_agent.h"
#include "flotilla/node/scheduler_link.h"

namespace flotilla::node {

absl::Status RunSchedulerLink(NodeAgent& agent, const std::string& scheduler_address, const std::string& node_id,
                              const std::string& advertised_address, const std::function<bool()>& stop,
                              const std::function<void()>& on_registered) {
  SchedulerLinkOptions o;
  o.scheduler_address = scheduler_address;
  o.node_id = node_id;
  o.node_address = advertised_address;
  o.rpc_timeout_ms = 2000;  // bounds how long a stop waits for a call in flight
  // Sandboxes the scheduler does not know are left running: the agent also serves callers
  // that create sandboxes directly.
  SchedulerLink link(o, [&agent] { return std::make_pair(agent.Usage(), agent.SandboxIds()); }, nullptr);
  if (absl::Status s = link.Register(); !s.ok()) return s;
  if (on_registered) on_registered();
  while (!stop()) {
    link.Step();
    const auto interval = std::chrono::milliseconds(link.interval_ms());
    for (auto slept = std::chrono::milliseconds(0); slept < interval && !stop(); slept += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::node
