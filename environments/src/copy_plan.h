// CopyPlan: what a COPY or ADD of build-context files puts where, and the content hash of it
// that goes into the step's cache key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/environments/dockerfile.h"

namespace flotilla::environments {

struct CopyPlan {
  struct File {
    std::string dest;    // absolute path in the image
    std::string source;  // host path ("" for a here-document)
    std::string inline_content;
    uint32_t mode = 0644;
  };
  std::vector<File> files;
  std::vector<std::string> dest_dirs;                          // made if missing, left as they are
  std::vector<std::pair<std::string, uint32_t>> dirs;          // copied directories (with their modes)
  std::vector<std::pair<std::string, std::string>> symlinks;   // dest -> target
  std::vector<std::pair<std::string, std::string>> archives;   // ADD: host archive -> dest dir
  // A single file copied to a path without a trailing '/': a file of that name, unless the
  // image has a directory there (checked when the step runs).
  bool single_file = false;
  std::string key;  // sha256 over every path, mode and content
};

// `sources` are context-relative (globs allowed in their last element) or "<<NAME" for a
// here-document of `in`; `dest` is absolute. Errors name `where` ("Dockerfile:7: COPY").
absl::StatusOr<CopyPlan> PlanContextCopy(const std::string& context_dir, const std::vector<std::string>& sources,
                                         const std::string& dest, bool is_add, const Instruction& in,
                                         const std::string& where);

}  // namespace flotilla::environments

namespace flotilla::environments {

class BuildSandbox;

struct CopyOwner {
  std::string chown;  // --chown=user[:group]; empty: root
  std::string chmod;  // --chmod=octal, for copied regular files; empty: the sources' modes
};

// Puts a context copy into the build sandbox (files, directories, symlinks, extracted archives).
absl::Status ExecuteCopy(BuildSandbox& sb, const CopyPlan& plan, const CopyOwner& owner);

// COPY --from: `sources` (absolute in `from`'s image) to `dest` in `to`, through tar.
absl::Status CopyBetween(BuildSandbox& from, BuildSandbox& to, const std::vector<std::string>& sources,
                         const std::string& dest, const CopyOwner& owner);

}  // namespace flotilla::environments
