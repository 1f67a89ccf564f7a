// The node side of the Scheduler protocol: registers a node agent with the scheduler and
// heartbeats its usage and sandbox list; re-registers when the scheduler no longer knows the
// node (it restarted without a journal, or declared the node dead); hands the ids the
// scheduler does not know to `on_unknown` (the agent destroys them).
//
// Thread-safe. Owns one thread, stopped and joined by Stop() or destruction.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "flotilla/proto/scheduler.grpc.pb.h"
#include "flotilla/scheduler/resources.h"

namespace flotilla::scheduler {

struct NodeReporterOptions {
  std::string scheduler_address;
  std::string node_id;
  std::string node_address;   // where the scheduler reaches this node's NodeAgent
  std::string scale_unit;     // empty: the scheduler picks
  int64_t interval_ms = 0;    // 0: what the scheduler asks for
  int64_t rpc_timeout_ms = 2000;
};

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
  bool Register();
  bool Beat();

  const NodeReporterOptions options_;
  const SnapshotFn snapshot_;
  const UnknownFn on_unknown_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  std::atomic<bool> registered_{false};
  int64_t interval_ms_ = 1000;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace flotilla::scheduler
