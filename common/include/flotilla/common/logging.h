// Structured logging over spdlog. One process-wide logger; fields go as key=value pairs.
//
//   FLOG(info, "sandbox created", {{"id", id}, {"ms", ms}});
//
// Thread-safe (spdlog's multi-threaded sink). Output goes to stderr; level from
// FLOTILLA_LOG (trace, debug, info, warn, error, off; default info).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace flotilla {

struct LogField {
  std::string key;
  std::string value;
  template <typename T>
  LogField(std::string_view k, const T& v) : key(k) {
    if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      value = std::string(std::string_view(v));
    } else {
      value = absl::StrCat(v);
    }
  }
};

// Sets up the logger once; later calls only change the level.
void InitLogging(std::string_view level = "");

// Joins "msg key=value key=value", quoting values with spaces.
std::string FormatFields(std::string_view msg, std::initializer_list<LogField> fields);

}  // namespace flotilla

#define FLOG(level, msg, ...) \
  ::spdlog::level(::flotilla::FormatFields((msg), __VA_ARGS__))
