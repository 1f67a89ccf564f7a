// Unified diffs as `git diff` and quilt patches write them: split into per-file sections and
// applied to a file's text, forwards or in reverse, with exact matching of every context and
// changed line (a hunk may sit at another line than it says, never with other text).
//
//   std::vector<FileDiff> files = ParseUnifiedDiff(patch_text, 1);
//   absl::StatusOr<std::string> before = ApplyFileDiff(current, files[0], /*reverse=*/true);
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::synth {

struct DiffHunk {
  int old_start = 0;  // 1-based line in the old file (0 for an empty old side)
  int new_start = 0;
  std::vector<std::string> old_lines;  // context and removed lines, each with its '\n' unless
  std::vector<std::string> new_lines;  // "\ No newline at end of file" followed it
};

struct FileDiff {
  std::string old_path;  // "/dev/null" when the file is created
  std::string new_path;  // "/dev/null" when the file is deleted
  bool binary = false;   // "Binary files ... differ" or "GIT binary patch"
  int added = 0;         // '+' lines
  int removed = 0;       // '-' lines
  std::vector<DiffHunk> hunks;

  // The file's path in the tree the diff applies to (new_path unless the file is deleted).
  const std::string& path() const { return new_path == "/dev/null" ? old_path : new_path; }
};

// The file sections of `text` in order; `strip` leading path components are removed from each
// path (patch's -p: 1 for "a/x" and "pkg-1.0/x"). Text outside sections (a patch's description,
// a mail signature) is ignored. Sections with no hunks (a mode change) keep an empty hunk list.
std::vector<FileDiff> ParseUnifiedDiff(absl::string_view text, int strip);

// `content` with the diff applied (reverse: undone). InvalidArgument naming the hunk and its
// line when a hunk's lines are not found in the content.
absl::StatusOr<std::string> ApplyFileDiff(const std::string& content, const FileDiff& diff, bool reverse);

}  // namespace flotilla::synth
