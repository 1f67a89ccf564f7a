#include "registry_hint.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flotilla::environments {

std::string RegistryHint(const std::string& command) {
  static const std::vector<std::pair<const char*, const char*>> kInstallers = {
      {"pip install", "PyPI (pip)"},        {"pip3 install", "PyPI (pip)"},
      {"uv pip install", "PyPI (uv)"},
      {"pipx install", "PyPI (pipx)"},      {"npm install", "the npm registry"},
      {"npm ci", "the npm registry"},       {"npm i ", "the npm registry"},
      {"npx ", "the npm registry"},         {"yarn add", "the npm registry (yarn)"},
      {"yarn install", "the npm registry (yarn)"}, {"pnpm install", "the npm registry (pnpm)"},
      {"pnpm add", "the npm registry (pnpm)"},     {"gem install", "RubyGems"},
      {"bundle install", "RubyGems (bundler)"},    {"cargo install", "crates.io"},
      {"cargo build", "crates.io"},         {"go install", "the Go module proxy"},
      {"go get", "the Go module proxy"},    {"go mod download", "the Go module proxy"},
  };
  for (const auto& [needle, registry] : kInstallers) {
    if (command.find(needle) == std::string::npos) continue;
    return absl::StrCat("note: ", registry,
                        " is unreachable from the build sandbox: builds reach only this machine's apt mirrors. "
                        "Install the Debian packages instead (python3-<name>, node-<name>, ruby-<name>, "
                        "librust-<name>-dev, golang-<name>-dev) or put the files in the build context.");
  }
  return "";
}

}  // namespace flotilla::environments
