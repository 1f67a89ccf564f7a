// What the sandbox benchmarks share: a scratch folder owned for the run, and one
// create -> exec /bin/true -> destroy cycle on a runtime.
#pragma once

#include <atomic>
#include <filesystem>

#include "absl/status/status.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::bench {

// A directory owned for the run: removed with everything in it when the value dies.
class ScratchDir {
 public:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// create -> exec /bin/true -> destroy under the "default" policy, the figure the scheduler pays
// per rollout. Counts the Creates that were handed a sandbox started ahead in `started_ahead`
// (may be null).
absl::Status SandboxCycle(sandbox::Runtime& runtime, std::atomic<int>* started_ahead);

}  // namespace flotilla::bench
