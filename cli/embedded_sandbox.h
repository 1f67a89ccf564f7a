// The node an experiment's sandboxes come from in the embedded default: a NodeAgent over this
// host's runtime, reached over an in-process channel (the same API as a remote node).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/embedded_node.h"

namespace flotilla::cli {

// Starts the embedded node with its runtime state under `state_dir`. Its cgroup prefix is
// derived from the directory, so a restarted experiment cleans up what its previous run left
// while other runtimes on the host are untouched.
absl::StatusOr<std::unique_ptr<worker::EmbeddedNode>> StartEmbeddedNode(const std::string& state_dir);

}  // namespace flotilla::cli
