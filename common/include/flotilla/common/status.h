// Errors are values: absl::Status / absl::StatusOr<T>, with early-return macros.
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto fd, OpenFile(path));
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define FLOTILLA_CONCAT_INNER(a, b) a##b
#define FLOTILLA_CONCAT(a, b) FLOTILLA_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    ::absl::Status flotilla_status_ = ::flotilla::ToStatus(expr); \
    if (!flotilla_status_.ok()) return flotilla_status_;        \
  } while (0)

#define FLOTILLA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  FLOTILLA_ASSIGN_OR_RETURN_IMPL(FLOTILLA_CONCAT(flotilla_statusor_, __LINE__), lhs, expr)

namespace flotilla {

inline const absl::Status& ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// An error from a failed system call: maps errno to a status code and names the operation.
absl::Status ErrnoStatus(std::string_view what, int err = errno);

// Prefixes a status's message with context ("loading policy.yaml: ...") keeping its code.
absl::Status Annotate(const absl::Status& s, std::string_view context);

}  // namespace flotilla
