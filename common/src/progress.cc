#include "flotilla/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flotilla {
namespace {

constexpr int64_t kTtyRedrawNs = 100'000'000;

void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) return;  // the terminal went away: progress is not worth failing for
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string ProgressBar::Render(std::string_view label, uint64_t done, uint64_t total, double elapsed_s,
                                std::string_view detail, int width) {
  std::string out(label);
  if (total > 0) {
    const uint64_t shown = std::min(done, total);
    const int filled = static_cast<int>(static_cast<double>(shown) / static_cast<double>(total) * width);
    absl::StrAppend(&out, out.empty() ? "" : " ", "[", std::string(filled, '#'), std::string(width - filled, '.'),
                    "]  ", done, "/", total, "  ", (shown * 100) / total, "%");
    if (shown >= total) {
      absl::StrAppend(&out, "  ", FormatDuration(elapsed_s));
    } else if (shown > 0) {
      const double left = elapsed_s / static_cast<double>(shown) * static_cast<double>(total - shown);
      absl::StrAppend(&out, "  ", FormatDuration(left), " left");
    }
  } else {
    absl::StrAppend(&out, out.empty() ? "" : " ", done, " done  ", FormatDuration(elapsed_s));
  }
  if (!detail.empty()) out.append("  ").append(detail);
  return out;
}

ProgressBar::ProgressBar(ProgressOptions options)
    : options_(std::move(options)),
      tty_(options_.tty >= 0 ? options_.tty == 1 : ::isatty(options_.fd) == 1),
      start_ns_(options_.clock->NowNanos()) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done, std::string_view detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ = done;
  detail_ = std::string(detail);
  const int64_t now = options_.clock->NowNanos();
  const int64_t interval = tty_ ? kTtyRedrawNs : static_cast<int64_t>(options_.plain_interval_s * 1e9);
  const bool complete = options_.total > 0 && done >= options_.total;
  if (drawn_ && now - last_draw_ns_ < interval && !(tty_ && complete)) return;
  Draw(false);
}

void ProgressBar::Finish(std::string_view detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!drawn_ && detail.empty()) return;  // never shown: nothing to end
  if (!detail.empty()) detail_ = std::string(detail);
  // A plain log already holding this very state needs no second copy of it.
  if (!tty_ && drawn_done_ == done_ && drawn_detail_ == detail_) return;
  Draw(true);
}

void ProgressBar::Draw(bool final) {
  const int64_t now = options_.clock->NowNanos();
  const std::string line = Render(options_.label, done_, options_.total,
                                  static_cast<double>(now - start_ns_) * 1e-9, detail_, options_.width);
  if (tty_) {
    WriteAll(options_.fd, absl::StrCat("\r\033[K", line, final ? "\n" : ""));
  } else {
    WriteAll(options_.fd, absl::StrCat(line, "\n"));
  }
  last_draw_ns_ = now;
  drawn_ = true;
  drawn_done_ = done_;
  drawn_detail_ = detail_;
}

}  // namespace flotilla
