// The difficulty stage's records: labels, the band's syntax, a task's row from its attempts,
// and task.toml's [synth.difficulty] (difficulty.h).
#include "flotilla/synth/difficulty.h"

#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "flotilla/eval/trial_runner.h"

namespace flotilla::synth {
namespace {

std::string Toml(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
}

}  // namespace

absl::Status CheckDifficultyOptions(const DifficultyOptions& o) {
  if (!o.agent.empty() && !eval::IsBuiltInAgent(o.agent)) {
    return absl::InvalidArgumentError(absl::StrCat("--difficulty-agent '", o.agent,
                                                   "': expected oracle, nop, mini or terminal (agent CLIs: measure "
                                                   "with `flotilla eval -p DIR -a CLI -k N`)"));
  }
  if (o.attempts < 0) return absl::InvalidArgumentError("--difficulty-attempts: must be 0 (not measured) or more");
  if (o.concurrency < 1) return absl::InvalidArgumentError("--difficulty-concurrency: must be at least 1");
  return absl::OkStatus();
}

bool AttemptCounts(const eval::TrialResult& r) { return r.error_type.empty() || r.error_type == "agent_timeout"; }

absl::StatusOr<DifficultyRow> SummarizeAttempts(const std::string& task, const std::string& policy,
                                                const std::vector<eval::TrialResult>& attempts) {
  DifficultyRow row;
  row.task = task;
  row.policy = policy;
  int timeouts = 0;
  std::vector<std::string> errors;
  for (const eval::TrialResult& r : attempts) {
    row.seconds += r.seconds;
    if (!AttemptCounts(r)) {
      errors.push_back(absl::StrCat("attempt ", r.attempt, ": ", r.error_type, ": ", r.detail.substr(0, 200)));
      continue;
    }
    ++row.attempts;
    timeouts += r.error_type == "agent_timeout" ? 1 : 0;
    row.solved += r.error_type.empty() && r.reward >= 1.0 ? 1 : 0;
  }
  if (!errors.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(errors.size(), " of ", attempts.size(), " attempts by ", policy,
                                                      " ended in a platform error; a rerun tries them again: ",
                                                      absl::StrJoin(errors, "; ")));
  }
  if (row.attempts == 0) return absl::FailedPreconditionError(absl::StrCat("no attempt by ", policy, " ran"));
  row.solve_rate = static_cast<double>(row.solved) / row.attempts;
  row.label = DifficultyLabel(row.solved, row.attempts);
  row.reason = absl::StrCat("solved ", row.solved, " of ", row.attempts, " attempts by ", policy,
                            timeouts > 0 ? absl::StrCat(" (", timeouts, " ran out of time)") : "");
  return row;
}

std::string DifficultyLabel(int solved, int attempts) {
  if (attempts <= 0) return "unknown";
  const double rate = static_cast<double>(solved) / attempts;
  if (rate >= 0.7) return "easy";
  if (rate >= 0.3) return "medium";
  if (rate > 0) return "hard";
  return "unsolved";
}

absl::StatusOr<DifficultyBand> ParseDifficultyBand(std::string_view band) {
  const std::string text(band);
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  DifficultyBand b;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &b.lo) || !absl::SimpleAtod(parts[1], &b.hi) ||
      !(b.lo >= 0 && b.lo <= b.hi && b.hi <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--difficulty-band '", text, "': expected LO:HI with 0 <= LO <= HI <= 1 (e.g. 0.1:0.9)"));
  }
  return b;
}

std::string TaskTomlWithDifficulty(const std::string& toml, const DifficultyRow& row, const std::string& band) {
  std::vector<std::string> lines = absl::StrSplit(toml, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<std::string> out;
  std::string section;
  bool set_metadata = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string t(absl::StripAsciiWhitespace(lines[i]));
    if (absl::StartsWith(t, "[")) {
      if (section == "metadata" && !set_metadata) {
        // A [metadata] without difficulty gets one (before the blank lines ending it).
        size_t at = out.size();
        while (at > 0 && absl::StripAsciiWhitespace(out[at - 1]).empty()) --at;
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), "difficulty = " + Toml(row.label));
        set_metadata = true;
      }
      section = t.substr(1, t.find(']') == std::string::npos ? std::string::npos : t.find(']') - 1);
      if (section == "synth.difficulty") continue;
    }
    if (section == "synth.difficulty") continue;  // replaced below
    const std::string key(absl::StripAsciiWhitespace(t.substr(0, t.find('='))));
    if (section == "metadata" && key == "difficulty" && t.find('=') != std::string::npos) {
      out.push_back("difficulty = " + Toml(row.label));
      set_metadata = true;
      continue;
    }
    if (section == "synth" && key == "difficulty_reason") continue;
    out.push_back(lines[i]);
  }
  if (section == "metadata" && !set_metadata) out.push_back("difficulty = " + Toml(row.label));
  while (!out.empty() && absl::StripAsciiWhitespace(out.back()).empty()) out.pop_back();
  std::ostringstream s;
  s << absl::StrJoin(out, "\n") << "\n\n[synth.difficulty]\n"
    << "solve_rate = " << absl::StrFormat("%.4g", row.solve_rate) << "\nattempts = " << row.attempts
    << "\nsolved = " << row.solved << "\nlabel = " << Toml(row.label) << "\npolicy = " << Toml(row.policy)
    << "\nreason = " << Toml(row.reason) << "\nband = " << Toml(band) << "\n";
  return s.str();
}

}  // namespace flotilla::synth
