// Running a helper program (apparmor_parser) and collecting what it prints.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::policies {

struct CommandResult {
  int exit_code = -1;  // 128+signal when killed
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (an absolute path) with argv, no shell, stdin from /dev/null. Fails only when the
// program cannot be started.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv);

}  // namespace flotilla::policies
