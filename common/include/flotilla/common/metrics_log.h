// MetricsLog: a run's metrics, one JSON object per line (JSONL) in its state dir, one line per
// trainer step: {"step":12,"unix_ms":1733212345000,"reward_mean":0.41,...}.
//
// Append() writes the whole line with one write(2) on an O_APPEND fd, so a reader never sees
// a torn line of a finished append and a crash loses at most the line being written.
// ReadMetricsLog() skips a last line without its newline (an append cut by a crash).
//
// Thread-safety: Append may be called from several threads; lines do not interleave.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla {

struct MetricsLogLine {
  int64_t step = 0;
  int64_t unix_ms = 0;
  std::map<std::string, double> values;  // finite values only; NaN/Inf are dropped on append
};

class MetricsLog {
 public:
  // Opens (creating it and its parent directory if needed) `path` for appending.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  absl::Status Append(const MetricsLogLine& line);
  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// The whole log in order. A missing file is an empty log; a malformed complete line is an
// error naming the file and line number.
absl::StatusOr<std::vector<MetricsLogLine>> ReadMetricsLog(const std::string& path);

// One line's JSON text (no newline); keys of `values` as given, after "step" and "unix_ms".
std::string MetricsLogLineJson(const MetricsLogLine& line);

}  // namespace flotilla
