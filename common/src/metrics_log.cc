#include "flotilla/common/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla {
namespace {

std::string JsonNumber(double v) {
  char buf[40];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

}  // namespace

std::string MetricsLogLineJson(const MetricsLogLine& line) {
  std::string out = absl::StrCat("{\"step\":", line.step, ",\"unix_ms\":", line.unix_ms);
  for (const auto& [k, v] : line.values) {
    if (!std::isfinite(v)) continue;
    absl::StrAppend(&out, ",", nlohmann::json(k).dump(), ":", JsonNumber(v));
  }
  out += "}";
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return absl::InternalError(absl::StrCat("metrics log ", path, ": ", ec.message()));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("metrics log ", path, ": ", std::strerror(errno)));
  return std::unique_ptr<MetricsLog>(new MetricsLog(path, fd));
}

MetricsLog::~MetricsLog() { ::close(fd_); }

absl::Status MetricsLog::Append(const MetricsLogLine& line) {
  std::string text = MetricsLogLineJson(line) + "\n";
  ssize_t n = ::write(fd_, text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("metrics log ", path_, ": short write (",
                                            n < 0 ? std::strerror(errno) : "disk full?", ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<MetricsLogLine>> ReadMetricsLog(const std::string& path) {
  std::vector<MetricsLogLine> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  int lineno = 0;
  while (pos < all.size()) {
    size_t nl = all.find('\n', pos);
    if (nl == std::string::npos) break;  // cut by a crash mid-append
    ++lineno;
    std::string text = all.substr(pos, nl - pos);
    pos = nl + 1;
    if (text.empty()) continue;
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      return absl::DataLossError(absl::StrCat(path, ":", lineno, ": not a metrics line (needs an object with an integer \"step\")"));
    }
    MetricsLogLine line;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "step") {
        line.step = it.value().get<int64_t>();
      } else if (it.key() == "unix_ms" && it.value().is_number_integer()) {
        line.unix_ms = it.value().get<int64_t>();
      } else if (it.value().is_number()) {
        line.values[it.key()] = it.value().get<double>();
      } else {
        return absl::DataLossError(absl::StrCat(path, ":", lineno, ": field \"", it.key(), "\" is not a number"));
      }
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace flotilla
