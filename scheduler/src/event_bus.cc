#include "flotilla/scheduler/event_bus.h"

namespace flotilla::scheduler {

Subscription::~Subscription() { bus_->Unsubscribe(this); }

absl::StatusOr<v1::SchedulerEvent> Subscription::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !queue_.empty() || overflowed_ || closed_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (overflowed_) return absl::ResourceExhaustedError("watch: subscriber fell behind; re-list and watch again");
  if (!queue_.empty()) {
    v1::SchedulerEvent ev = std::move(queue_.front());
    queue_.pop_front();
    return ev;
  }
  if (closed_) return absl::CancelledError("watch: scheduler shutting down");
  return absl::DeadlineExceededError("watch: no event");
}

void Subscription::Push(const v1::SchedulerEvent& ev) {
  if (!tenant_.empty()) {
    auto it = ev.placement().labels().find("tenant");
    if (it == ev.placement().labels().end() || it->second != tenant_) return;
  }
  absl::MutexLock lock(&mu_);
  if (overflowed_) return;
  if (queue_.size() >= bound_) {
    overflowed_ = true;
    queue_.clear();
    return;
  }
  queue_.push_back(ev);
}

void Subscription::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

EventBus::~EventBus() { Close(); }

std::unique_ptr<Subscription> EventBus::Subscribe(const std::string& tenant, size_t bound) {
  std::unique_ptr<Subscription> s(new Subscription(this, tenant, bound));
  absl::MutexLock lock(&mu_);
  if (closed_) s->Close();
  subs_.insert(s.get());
  count_.fetch_add(1, std::memory_order_release);
  return s;
}

void EventBus::Unsubscribe(Subscription* s) {
  absl::MutexLock lock(&mu_);
  if (subs_.erase(s) > 0) count_.fetch_sub(1, std::memory_order_release);
}

void EventBus::Publish(const v1::SchedulerEvent& ev) {
  if (count_.load(std::memory_order_acquire) == 0) return;
  absl::MutexLock lock(&mu_);
  for (Subscription* s : subs_) s->Push(ev);
}

void EventBus::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (Subscription* s : subs_) s->Close();
}

}  // namespace flotilla::scheduler
