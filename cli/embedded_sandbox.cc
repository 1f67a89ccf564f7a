#include "embedded_sandbox.h"

#include <filesystem>
#include <functional>

#include "absl/strings/str_format.h"

namespace flotilla::cli {

absl::StatusOr<std::unique_ptr<worker::EmbeddedNode>> StartEmbeddedNode(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  std::string abs = std::filesystem::absolute(state_dir, ec).lexically_normal().string();
  return worker::EmbeddedNode::Start(
      abs, absl::StrFormat("flotilla-x%08x", static_cast<uint32_t>(std::hash<std::string>{}(abs))),
      /*cleanup_leftovers=*/true);
}

}  // namespace flotilla::cli
