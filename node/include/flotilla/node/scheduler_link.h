// The node side of the Scheduler protocol (scheduler.proto), one implementation for the node
// agent (RunSchedulerLink) and the simulator's NodeReporter (scheduler/sim): RegisterNode, then a
// Heartbeat with the node's usage and sandbox list each interval; registers again when the
// scheduler answers a heartbeat with NOT_FOUND (it restarted without a journal, or declared
// the node dead); hands the ids the scheduler does not know to `on_unknown`.
//
// Thread-compatible: one thread drives a link (Register/Beat/Step); the callbacks run on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "flotilla/proto/scheduler.grpc.pb.h"

namespace flotilla::node {

struct SchedulerLinkOptions {
  std::string scheduler_address;
  std::string node_id;
  std::string node_address;   // where the scheduler reaches this node's NodeAgent
  std::string scale_unit;     // empty: the scheduler picks
  int64_t interval_ms = 0;    // 0: what the scheduler asks for (1 s until it has said)
  int64_t rpc_timeout_ms = 2000;
};

class SchedulerLink {
 public:
  // The node's usage and its own sandbox ids, taken together.
  using SnapshotFn = std::function<std::pair<v1::NodeUsage, std::vector<std::string>>()>;
  using UnknownFn = std::function<void(const std::vector<std::string>&)>;

  // `on_unknown` may be empty (unknown ids are then left alone).
  SchedulerLink(const SchedulerLinkOptions& options, SnapshotFn snapshot, UnknownFn on_unknown);
  SchedulerLink(const SchedulerLink&) = delete;
  SchedulerLink& operator=(const SchedulerLink&) = delete;

  // One RegisterNode call. Unavailable (with the scheduler's words) when it fails.
  absl::Status Register();
  // One Heartbeat call. NotFound when the scheduler no longer knows the node (the link is
  // then unregistered); other errors when the call failed.
  absl::Status Beat();
  // Registers if not registered, then beats if registered: one interval's work.
  void Step();

  [[nodiscard]] bool registered() const { return registered_; }
  [[nodiscard]] int64_t interval_ms() const { return interval_ms_; }

 private:
  const SchedulerLinkOptions options_;
  const SnapshotFn snapshot_;
  const UnknownFn on_unknown_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  bool registered_ = false;
  int64_t interval_ms_ = 1000;
};

}  // namespace flotilla::node
