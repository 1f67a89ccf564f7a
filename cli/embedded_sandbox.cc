#include "embedded_sandbox.h"

#include <filesystem>
#include <functional>

#include "absl/strings/str_format.h"

namespace flotilla::cli {

absl::StatusOr<std::unique_ptr<sandbox::Runtime>> OpenSandboxRuntime(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  std::string abs = std::filesystem::absolute(state_dir, ec).lexically_normal().string();
  sandbox::RuntimeOptions o;
  o.state_dir = abs;
  o.cgroup_prefix = absl::StrFormat("flotilla-x%08x", static_cast<uint32_t>(std::hash<std::string>{}(abs)));
  o.cleanup_leftovers = true;
  return sandbox::Runtime::Open(o);
}

}  // namespace flotilla::cli
