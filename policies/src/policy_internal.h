// Pieces of the policy loader shared between its source files.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {

// "443" or "8000-8100"; 1..65535, lo <= hi.
absl::StatusOr<PortRange> ParsePortRange(std::string_view text);

// The text of a shipped policy by name, or nullptr (generated from policies/*.yaml at build).
const char* BuiltinPolicyText(std::string_view name);

}  // namespace flotilla::policies
