#include "flotilla/trainer_bridge/length_bias_gate.h"

#include <algorithm>
#include <vector>

namespace flotilla::trainer_bridge {

double LengthBiasGate::Median(const std::string& dataset) const {
  auto it = lengths_.find(dataset);
  if (it == lengths_.end() || it->second.empty()) return 0;
  std::vector<uint32_t> v(it->second.begin(), it->second.end());
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

size_t LengthBiasGate::Observed(const std::string& dataset) const {
  auto it = lengths_.find(dataset);
  return it == lengths_.end() ? 0 : it->second.size();
}

int64_t LengthBiasGate::OnFinished(const std::string& dataset, uint32_t length, int64_t dispatch_nanos,
                                   int64_t finish_nanos) {
  // Decide against the distribution seen so far, then record: a sample never holds itself.
  double m = Median(dataset);
  bool warm = Observed(dataset) >= config_.warmup_samples && Observed(dataset) > 0;
  auto& q = lengths_[dataset];
  q.push_back(length);
  if (q.size() > window_) q.pop_front();
  if (!config_.enabled || config_.strength <= 0 || !warm || static_cast<double>(length) >= m) {
    return finish_nanos;
  }
  double l = std::max<double>(length, 1.0);
  double elapsed = static_cast<double>(finish_nanos - dispatch_nanos);
  double target = static_cast<double>(dispatch_nanos) + elapsed * (1.0 + config_.strength * (m / l - 1.0));
  int64_t cap = finish_nanos + config_.max_hold_ms * 1'000'000;
  return std::clamp<int64_t>(static_cast<int64_t>(target), finish_nanos, cap);
}

}  // namespace flotilla::trainer_bridge
