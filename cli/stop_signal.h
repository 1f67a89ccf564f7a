// StopSignal: records SIGINT and SIGTERM while it lives, so a long-running command can stop
// in order (stop dispatch, stop children, flush records, print its summary) instead of dying.
//
// The constructor installs async-signal-safe handlers that only store the signal number and
// count deliveries; the destructor restores the previous handlers. One instance at a time per
// process (a second one CHECK-fails). The accessors are safe from any thread.
#pragma once

#include <csignal>

namespace flotilla::cli {

class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The first signal received (SIGINT or SIGTERM), or 0 while none has arrived.
  [[nodiscard]] int received() const;
  // How many signals have arrived (a second one asks to skip the orderly wait).
  [[nodiscard]] int count() const;
  // The conventional exit status for the received signal: 128 + signal number (130, 143).
  [[nodiscard]] int exit_code() const { return 128 + received(); }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace flotilla::cli
