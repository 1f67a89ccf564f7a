#include "thread_pool.h"

namespace flotilla::inference {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  std::unique_lock<std::mutex> l(mu_);
  fn_ = &fn;
  n_ = n;
  next_ = 0;
  pending_ = n;
  ++generation_;
  cv_.notify_all();
  while (next_ < n_) {
    int i = next_++;
    l.unlock();
    fn(i);
    l.lock();
    --pending_;
  }
  done_cv_.wait(l, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || (generation_ != seen && fn_ != nullptr && next_ < n_); });
    if (stop_) return;
    seen = generation_;
    while (fn_ != nullptr && next_ < n_) {
      int i = next_++;
      const std::function<void(int)>* fn = fn_;
      l.unlock();
      (*fn)(i);
      l.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace flotilla::inference
