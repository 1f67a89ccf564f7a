// TrainerProcess: the Python trainer as a child process of `flotilla run`.
//
// The child runs in its own process group, so a terminal's Ctrl-C reaches only the parent,
// which decides when to stop it. Owns the child: the destructor terminates it (SIGTERM, then SIGKILL after a grace period)
// if it is still running. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::cli {

class TrainerProcess {
 public:
  static absl::StatusOr<TrainerProcess> Spawn(const std::vector<std::string>& argv,
                                              const std::map<std::string, std::string>& env);
  TrainerProcess(TrainerProcess&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  TrainerProcess& operator=(TrainerProcess&&) = delete;
  TrainerProcess(const TrainerProcess&) = delete;
  ~TrainerProcess();

  // The exit code once the child has exited (nullopt while it runs). A signal gives 128 + n.
  std::optional<int> Poll();
  // Sends SIGTERM and waits up to `grace_ms`, then SIGKILL.
  int Terminate(int grace_ms);
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  explicit TrainerProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> exit_;
};

// The source and build trees this binary belongs to (for the Python package and its stubs).
std::string FlotillaSourceDir();
std::string FlotillaBinaryDir();

}  // namespace flotilla::cli
