// BuildSandbox: one build step's sandbox, as root, over the layers built so far; its writable
// layer becomes the step's new layer.
//
// It runs under the "build" policy plus its own loopback. While a RUN command runs, a
// MirrorProxy listens on that loopback and the command's http_proxy/https_proxy point at it:
// the machine's apt mirrors are reachable through it and nothing else is (the sandbox's
// network namespace has no other way out).
//
// Not thread-safe; one per step. Destroys its sandbox when it goes.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/common/text_files.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::environments {

struct StepOutput {
  int exit_code = -1;
  std::string reason;  // the runtime's stop reason ("timeout", ...) when it stopped the command
  std::string tail;    // the last 8 KiB of stdout and stderr, interleaved as they came
};

class BuildSandbox {
 public:
  // `top` is an image top ("sha256:<hex>" or "dir:<rootfs>"); `mirror_hosts` the host names
  // of the machine's apt sources.
  static absl::StatusOr<std::unique_ptr<BuildSandbox>> Start(
      sandbox::Runtime& runtime, const std::string& top, std::set<std::string> mirror_hosts,
      sandbox::ExecutionClass execution_class = sandbox::ExecutionClass::kBestEffort);
  ~BuildSandbox();
  BuildSandbox(const BuildSandbox&) = delete;
  BuildSandbox& operator=(const BuildSandbox&) = delete;

  // Runs argv (as `user` when not empty/root, via setpriv) in `cwd` with exactly `env`.
  // Output lines go to `progress` as they come. With `with_mirrors`, through the mirror proxy.
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
  std::set<std::string> mirror_hosts_;
};

}  // namespace flotilla::environments
