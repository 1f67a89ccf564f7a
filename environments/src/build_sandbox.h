// BuildSandbox: one build step's sandbox, as root, over the layers built so far; its writable
// layer becomes the step's new layer.
//
// It runs under the "build" policy (network only to the machine's apt mirrors, on HTTP and
// HTTPS; DNS is not allowed), so while a command runs, /etc/hosts also names the mirrors'
// addresses; the image's own /etc/hosts is put back before the layer is committed.
//
// Not thread-safe; one per step. Destroys its sandbox when it goes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::environments {

struct StepOutput {
  int exit_code = -1;
  std::string reason;  // the runtime's stop reason ("timeout", ...) when it stopped the command
  std::string tail;    // the last 8 KiB of stdout and stderr, interleaved as they came
};

class BuildSandbox {
 public:
  // `top` is an image top ("sha256:<hex>" or "dir:<rootfs>"); `mirror_hosts` the /etc/hosts
  // lines of the apt mirrors.
  static absl::StatusOr<std::unique_ptr<BuildSandbox>> Start(sandbox::Runtime& runtime, const std::string& top,
                                                             const std::string& mirror_hosts);
  ~BuildSandbox();
  BuildSandbox(const BuildSandbox&) = delete;
  BuildSandbox& operator=(const BuildSandbox&) = delete;

  // Runs argv (as `user` when not empty/root, via setpriv) in `cwd` with exactly `env`.
  // Output lines go to `progress` as they come.
  absl::StatusOr<StepOutput> Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                 const std::string& cwd, const std::string& user,
                                 const std::function<void(std::string_view)>& progress, bool with_mirrors);
  // Runs a root shell script and returns its stdout (binary safe); Internal with its output
  // when it exits non-zero.
  absl::StatusOr<std::string> Shell(const std::string& script, const std::string& stdin_data = "");
  absl::Status Put(const std::string& path, const std::string& content, uint32_t mode);
  // Commits the writable layer: the new layer's id and file bytes.
  absl::StatusOr<sandbox::SnapshotResult> Commit();

 private:
  BuildSandbox(sandbox::Runtime& runtime, std::string id) : runtime_(runtime), id_(std::move(id)) {}
  sandbox::Runtime& runtime_;
  std::string id_;
  std::string mirror_hosts_;
};

// Single-quotes `s` for a POSIX shell.
std::string ShellQuote(const std::string& s);

}  // namespace flotilla::environments
