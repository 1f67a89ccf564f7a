// What tests that start `flotilla` daemons as real processes share: where the CLI binary is,
// polling until a condition holds in real time, and reading a daemon's Prometheus text.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace flotilla::testing {

// The `flotilla` CLI of this build (FLOTILLA_BINARY_DIR, set by CTest; else ./build).
inline std::string FlotillaBinary() {
  const char* dir = std::getenv("FLOTILLA_BINARY_DIR");
  return std::filesystem::absolute(std::string(dir != nullptr ? dir : "build") + "/cli/flotilla").string();
}

// Polls `f` every `poll` until it is true or `seconds` pass; the last call's answer.
template <typename F>
bool WaitFor(F f, double seconds, std::chrono::milliseconds poll = std::chrono::milliseconds(50)) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(poll);
  }
  return f();
}

// One scrape of /metrics: the families its # TYPE lines declare, and "name{labels}" -> value.
struct MetricsScrape {
  std::set<std::string> families;
  std::map<std::string, double> samples;

  double operator[](const std::string& key) const {
    auto it = samples.find(key);
    return it == samples.end() ? 0 : it->second;
  }
  // The sum of a family's samples whose labels contain every `label="value"` of `labels`.
  double Sum(const std::string& name, const std::vector<std::string>& labels = {}) const {
    double total = 0;
    for (const auto& [key, value] : samples) {
      if (key != name && !key.starts_with(name + "{")) continue;
      bool match = true;
      for (const std::string& l : labels) match = match && key.find(l) != std::string::npos;
      if (match) total += value;
    }
    return total;
  }
};

inline MetricsScrape ParsePrometheusText(const std::string& body) {
  MetricsScrape s;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() > 2) s.families.insert(parts[2]);
    }
    if (line.front() == '#') continue;
    size_t sp = line.rfind(' ');
    s.samples[std::string(line.substr(0, sp))] = std::stod(std::string(line.substr(sp + 1)));
  }
  return s;
}

}  // namespace flotilla::testing
