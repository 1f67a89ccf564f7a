#include "candidate_files.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/text_files.h"
#include "flotilla/synth/c_mutator.h"
#include "nlohmann/json.hpp"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

}  // namespace

CandidateRow MinedCandidate(const MinedFix& fix) {
  CandidateRow c;
  // Patch names may hold folders ("upstream/fix.patch"); a commit hash is short enough.
  std::string ref = fix.kind == "commit" ? fix.ref.substr(0, 12) : fix.ref;
  for (char& ch : ref) ch = ch == '/' ? '_' : ch;
  c.id = absl::StrCat(fix.kind, "-", ref);
  c.source = kCommitMiningSource;
  c.kind = fix.kind;
  c.file = fix.source_files.front();
  c.line = fix.first_line;
  nlohmann::json j;
  j["ref"] = fix.ref;
  j["subject"] = fix.subject;
  j["tests"] = fix.test_files;
  for (const auto& [file, broken] : fix.broken) j["broken"][file] = broken;
  // The contents are UTF-8 (commit_miner.cc checks); a subject in another encoding is kept
  // with its odd bytes replaced.
  c.replacement = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  c.description = absl::StrCat(fix.kind, " ", fix.ref, ": ", fix.changed_lines, " source lines in ",
                               fix.source_files.size(), " files, ", fix.test_files.size(), " test files");
  return c;
}

absl::StatusOr<CandidateChange> CandidateFiles(const CandidateRow& c, const std::string& repo) {
  CandidateChange out;
  if (c.source != kCommitMiningSource) {
    std::string original = ReadFileOrEmpty(fs::path(repo) / c.file);
    if (c.end > static_cast<int64_t>(original.size()) || c.start > c.end || c.start < 0) {
      return absl::InvalidArgumentError(absl::StrCat("candidate ", c.id, ": the edit lies outside ", c.file));
    }
    SourceEdit e{c.file, c.kind, c.line, static_cast<size_t>(c.start), static_cast<size_t>(c.end), c.replacement, ""};
    out.files.push_back({c.file, original, ApplyEdit(original, e)});
    return out;
  }
  auto j = nlohmann::json::parse(c.replacement, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("broken") || !j["broken"].is_object() || j["broken"].empty()) {
    return absl::DataLossError(absl::StrCat("synth.db: candidates.replacement of ", c.id, ": not a mined fix"));
  }
  out.ref = j.value("ref", "");
  out.subject = j.value("subject", "");
  for (auto& [file, broken] : j["broken"].items()) {
    if (!broken.is_string()) {
      return absl::DataLossError(absl::StrCat("synth.db: candidates.replacement of ", c.id, ": broken.", file));
    }
    out.files.push_back({file, ReadFileOrEmpty(fs::path(repo) / file), broken.get<std::string>()});
  }
  return out;
}

}  // namespace flotilla::synth
