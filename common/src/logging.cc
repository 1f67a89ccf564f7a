#include "flotilla/common/logging.h"

#include <cstdlib>
#include <mutex>

#include "spdlog/sinks/stdout_color_sinks.h"

namespace flotilla {

void InitLogging(std::string_view level) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("flotilla");
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
    spdlog::set_default_logger(logger);
  });
  std::string lvl(level);
  if (lvl.empty()) {
    const char* env = std::getenv("FLOTILLA_LOG");
    lvl = env ? env : "info";
  }
  spdlog::set_level(spdlog::level::from_str(lvl));
}

std::string FormatFields(std::string_view msg, std::initializer_list<LogField> fields) {
  std::string out(msg);
  for (const auto& f : fields) {
    bool quote = f.value.find_first_of(" \t\"") != std::string::npos || f.value.empty();
    absl::StrAppend(&out, " ", f.key, "=", quote ? "\"" : "", f.value, quote ? "\"" : "");
  }
  return out;
}

}  // namespace flotilla
