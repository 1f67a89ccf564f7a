// The sandbox runtime an experiment's verifier uses, in this process (the embedded default).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::cli {

// Opens the node-local runtime with its state under `state_dir`. Its cgroup prefix is derived
// from the directory, so a restarted experiment cleans up what its previous run left while
// other runtimes on the host are untouched.
absl::StatusOr<std::unique_ptr<sandbox::Runtime>> OpenSandboxRuntime(const std::string& state_dir);

}  // namespace flotilla::cli
