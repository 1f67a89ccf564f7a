// The files a candidate changes, whatever its source: a procedural mutation's one edited file,
// or a mined fix's source files (commit_miner.h) with the fix reverted. Validation puts the
// broken contents into the base environment; the task writer ships them and the solution
// writes the fixed ones back.
//
//   CandidateRow row = MinedCandidate(fix);            // stored in synth.db
//   ASSIGN_OR_RETURN(CandidateChange ch, CandidateFiles(row, repo));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commit_miner.h"
#include "flotilla/synth/synth_state.h"

namespace flotilla::synth {

inline constexpr char kCommitMiningSource[] = "commit-mining";

struct FileChange {
  std::string file;    // relative to the repository
  std::string fixed;   // the content the repository has
  std::string broken;  // the content the task ships
};

struct CandidateChange {
  std::vector<FileChange> files;  // at least one
  std::string ref;                // a mined fix's commit hash or patch name ("" for mutations)
  std::string subject;            // its subject line
};

// The candidate row of a mined fix: source kCommitMiningSource, kind "commit" or
// "debian-patch", id "<kind>-<ref>", the broken contents (JSON) in `replacement`.
CandidateRow MinedCandidate(const MinedFix& fix);

// The change of a stored candidate against `repo`. DataLoss naming the candidate when its row
// is not readable; InvalidArgument when a mutation's edit lies outside its file.
absl::StatusOr<CandidateChange> CandidateFiles(const CandidateRow& c, const std::string& repo);

}  // namespace flotilla::synth
