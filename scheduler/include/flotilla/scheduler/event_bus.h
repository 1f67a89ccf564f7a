// Fan-out of scheduler events (created, destroyed, lost) to Watch subscribers, filtered by
// tenant. Publishing never blocks on a slow subscriber: a subscriber whose queue passes its
// bound is cut off (its Next() returns ResourceExhausted) and must re-list.
//
// Thread-safe. A Subscription must not outlive its EventBus.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "flotilla/proto/scheduler.pb.h"

namespace flotilla::scheduler {

class EventBus;

class Subscription {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // The next event; DeadlineExceeded after `timeout` with none; Cancelled once the bus
  // closes; ResourceExhausted when this subscriber fell too far behind.
  absl::StatusOr<v1::SchedulerEvent> Next(absl::Duration timeout);

 private:
  friend class EventBus;
  Subscription(EventBus* bus, std::string tenant, size_t bound) : bus_(bus), tenant_(std::move(tenant)), bound_(bound) {}
  void Push(const v1::SchedulerEvent& ev);
  void Close();

  EventBus* const bus_;
  const std::string tenant_;
  const size_t bound_;
  absl::Mutex mu_;
  std::deque<v1::SchedulerEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class EventBus {
 public:
  EventBus() = default;
  ~EventBus();
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;

  // Events for `tenant` (labels["tenant"] of the placement); empty: every event.
  std::unique_ptr<Subscription> Subscribe(const std::string& tenant, size_t bound = 1 << 20);
  void Publish(const v1::SchedulerEvent& ev);
  [[nodiscard]] bool has_subscribers() const { return count_.load(std::memory_order_acquire) != 0; }
  // Wakes every subscriber with Cancelled (server shutdown).
  void Close();

 private:
  friend class Subscription;
  void Unsubscribe(Subscription* s);

  std::atomic<size_t> count_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<Subscription*> subs_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace flotilla::scheduler
