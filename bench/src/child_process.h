// Runs a program as a whole child process (posix_spawn, streams to /dev/null) and waits for
// it: what a shell does for `runc run ...` or `flotilla sandbox run ...`. Reentrant.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace flotilla::bench {

// OK when the program exits 0; Internal naming the program and its status otherwise.
absl::Status RunChild(const std::vector<std::string>& argv);

// The first executable named `name` in $PATH, /usr/sbin or /sbin; empty when none.
std::string FindProgram(const std::string& name);

}  // namespace flotilla::bench
