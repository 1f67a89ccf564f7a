#include "episode_pool.h"

#include <algorithm>

namespace flotilla::trainer_bridge {

EpisodePool::EpisodePool(uint32_t threads) {
  for (uint32_t i = 0; i < std::max<uint32_t>(1, threads); ++i) threads_.emplace_back([this] { Work(); });
}

EpisodePool::~EpisodePool() { Join(); }

void EpisodePool::Submit(std::function<void()> episode) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(episode));
  cv_.notify_one();
}

void EpisodePool::Join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void EpisodePool::Work() {
  while (true) {
    std::function<void()> episode;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      episode = std::move(queue_.front());
      queue_.pop_front();
    }
    episode();
  }
}

}  // namespace flotilla::trainer_bridge
