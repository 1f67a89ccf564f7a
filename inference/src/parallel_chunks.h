// ForChunks: a loop over [0, n) cut into contiguous chunks, one thread per chunk, for the
// large element-wise passes of a weight load (widening, checking, bf16 conversion). Ranges
// under a few million elements run on the calling thread. fn must be safe to call
// concurrently on disjoint ranges.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace flotilla::inference {

template <typename Fn>
void ForChunks(size_t n, const Fn& fn) {
  constexpr size_t kMinChunk = size_t{1} << 22;
  const size_t threads = std::clamp<size_t>(n / kMinChunk, 1, std::max(1u, std::thread::hardware_concurrency()));
  if (threads == 1) {
    fn(size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t k = 0; k < threads; ++k) pool.emplace_back([&, k] { fn(n * k / threads, n * (k + 1) / threads); });
  for (std::thread& t : pool) t.join();
}

}  // namespace flotilla::inference
