// The node side of the Scheduler protocol on a thread of its own, for nodes that keep their
// usage as a NodeUsageSnapshot (the ledger-backed agents): a node::SchedulerLink (the same
// code the node agent runs) stepped every interval. It registers, heartbeats usage and the
// sandbox list, re-registers when the scheduler no longer knows the node, and hands the ids
// the scheduler does not know to `on_unknown` (the agent destroys them).
//
// Thread-safe. Owns one thread, stopped and joined by Stop() or destruction.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "flotilla/node/scheduler_link.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

using NodeReporterOptions = node::SchedulerLinkOptions;

class NodeReporter {
 public:
  using SnapshotFn = std::function<std::pair<NodeUsageSnapshot, std::vector<std::string>>()>;
  using UnknownFn = std::function<void(const std::vector<std::string>&)>;

  NodeReporter(const NodeReporterOptions& options, SnapshotFn snapshot, UnknownFn on_unknown);
  ~NodeReporter();
  NodeReporter(const NodeReporter&) = delete;
  NodeReporter& operator=(const NodeReporter&) = delete;

  void Stop();
  [[nodiscard]] bool registered() const { return registered_.load(); }

 private:
  void Loop();

  node::SchedulerLink link_;  // used by the thread only
  std::atomic<bool> registered_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace flotilla::scheduler
