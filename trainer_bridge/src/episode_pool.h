// EpisodePool: a fixed number of threads running queued episodes (one RL sample each: a
// sandbox, an agent, tests) to completion, in submission order.
//
// Thread-safe. The destructor (or Join) runs every episode already queued, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flotilla::trainer_bridge {

class EpisodePool {
 public:
  explicit EpisodePool(uint32_t threads);
  ~EpisodePool();
  EpisodePool(const EpisodePool&) = delete;
  EpisodePool& operator=(const EpisodePool&) = delete;

  void Submit(std::function<void()> episode);
  // Runs what is queued, then stops every thread. Idempotent.
  void Join();

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // GUARDED_BY(mu_)
  bool closing_ = false;                     // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
};

}  // namespace flotilla::trainer_bridge
