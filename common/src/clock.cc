#include "flotilla/common/clock.h"

namespace flotilla {

int64_t SystemClock::NowNanos() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::WallMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

SystemClock& SystemClock::Get() {
  static SystemClock clock;
  return clock;
}

}  // namespace flotilla
