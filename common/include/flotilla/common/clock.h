// Time behind a seam: components take a Clock& so tests can drive a FakeClock instead of
// sleeping. SystemClock is thread-safe and stateless; FakeClock is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace flotilla {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds (arbitrary epoch).
  virtual int64_t NowNanos() const = 0;
  // Wall-clock time in milliseconds since the Unix epoch (for records people read).
  virtual int64_t WallMillis() const = 0;

  int64_t NowMicros() const { return NowNanos() / 1000; }
  int64_t NowMillis() const { return NowNanos() / 1'000'000; }
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
};

class SystemClock final : public Clock {
 public:
  int64_t NowNanos() const override;
  int64_t WallMillis() const override;
  // The process-wide instance.
  static SystemClock& Get();
};

// A clock that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_nanos = 1'000'000'000) : now_(start_nanos) {}
  int64_t NowNanos() const override { return now_.load(std::memory_order_acquire); }
  int64_t WallMillis() const override { return 1'700'000'000'000 + NowMillis(); }
  void AdvanceNanos(int64_t d) { now_.fetch_add(d, std::memory_order_acq_rel); }
  void AdvanceMillis(int64_t d) { AdvanceNanos(d * 1'000'000); }

 private:
  std::atomic<int64_t> now_;
};

// Measures elapsed time on a clock.
class Stopwatch {
 public:
  explicit Stopwatch(const Clock& clock = SystemClock::Get()) : clock_(clock), start_(clock.NowNanos()) {}
  int64_t ElapsedNanos() const { return clock_.NowNanos() - start_; }
  double ElapsedMillis() const { return static_cast<double>(ElapsedNanos()) * 1e-6; }
  void Reset() { start_ = clock_.NowNanos(); }

 private:
  const Clock& clock_;
  int64_t start_;
};

}  // namespace flotilla
