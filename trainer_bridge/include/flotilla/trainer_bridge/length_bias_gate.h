// Length-bias control: samples that finish too early relative to their dataset's steady-state
// length distribution are held back and released smoothly, so the first batches are not
// dominated by short answers.
//
// For a sample of length l dispatched at t0 and finished at t1, with m the median of the last
// `window` completed lengths of its dataset (after `warmup` of them):
//   l >= m:  release at t1 (no hold)
//   l <  m:  release at t0 + (t1 - t0) * (1 + s * (m / l - 1)), capped at t1 + max_hold
// i.e. with strength s = 1 a short sample waits until a median-length one, generated at the
// same rate, would have finished. The hold is continuous in l: no cliff at the median.
//
// Not thread-safe; owned by the RolloutController under its lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "flotilla/trainer_bridge/experiment_config.h"

namespace flotilla::trainer_bridge {

class LengthBiasGate {
 public:
  explicit LengthBiasGate(const LengthBiasConfig& config, size_t window = 256)
      : config_(config), window_(window) {}

  // Records a completed sample and returns when it may be released (nanos on the clock).
  int64_t OnFinished(const std::string& dataset, uint32_t length, int64_t dispatch_nanos,
                     int64_t finish_nanos);
  // The current median of a dataset's window (0 when empty).
  [[nodiscard]] double Median(const std::string& dataset) const;
  [[nodiscard]] size_t Observed(const std::string& dataset) const;

 private:
  LengthBiasConfig config_;
  size_t window_;
  std::map<std::string, std::deque<uint32_t>> lengths_;
};

}  // namespace flotilla::trainer_bridge
