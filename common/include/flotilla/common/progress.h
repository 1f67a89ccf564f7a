// ProgressBar: the progress of a long CLI operation (a run's steps, an eval job's trials, a
// benchmark's steps, environment builds). On a terminal it redraws one line in place:
//
//   eval [#########...................]  12/40  30%  1m02s left  pass@1=0.500
//
// Anywhere else (a log file, a pipe, CI) it prints the same text as plain lines, at most one
// per `plain_interval_s` plus the last one, so logs stay short and readable.
//
//   ProgressBar bar({.label = "eval", .total = trials.size()});
//   bar.Update(done, absl::StrCat("pass@1=", p));   // any thread
//   bar.Finish();                                    // the final line (also on destruction)
//
// Thread-safety: every method is thread-safe. The fd is borrowed (stderr unless told).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "flotilla/common/clock.h"

namespace flotilla {

struct ProgressOptions {
  std::string label;
  uint64_t total = 0;          // 0: unknown (no bar, no estimate: a count and the rate)
  int fd = 2;
  int tty = -1;                // -1: isatty(fd); 0 or 1 forces plain lines or the redrawn bar
  double plain_interval_s = 10;
  int width = 30;              // characters of the bar
  const Clock* clock = &SystemClock::Get();
};

class ProgressBar {
 public:
  explicit ProgressBar(ProgressOptions options);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of `total` finished; `detail` follows the figures. A terminal redraws at most every
  // 0.1 s (and always when done reaches total).
  void Update(uint64_t done, std::string_view detail = {});
  // Draws the last state and ends the line (nothing when neither Update nor `detail` ever gave
  // it anything to show); later calls do nothing.
  void Finish(std::string_view detail = {});

  bool tty() const { return tty_; }

  // The line for one state (no newline, no escape codes): what both modes print.
  static std::string Render(std::string_view label, uint64_t done, uint64_t total, double elapsed_s,
                            std::string_view detail, int width);

 private:
  void Draw(bool final);  // mu_ held

  const ProgressOptions options_;
  const bool tty_;
  const int64_t start_ns_;
  std::mutex mu_;
  uint64_t done_ = 0;         // guarded by mu_
  std::string detail_;        // guarded by mu_
  int64_t last_draw_ns_ = 0;  // guarded by mu_
  bool drawn_ = false;        // guarded by mu_
  uint64_t drawn_done_ = 0;   // the state last drawn; guarded by mu_
  std::string drawn_detail_;  // guarded by mu_
  bool finished_ = false;     // guarded by mu_
};

// "42s", "3m05s", "2h07m".
std::string FormatDuration(double seconds);

}  // namespace flotilla
