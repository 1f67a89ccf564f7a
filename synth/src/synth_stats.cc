// `flotilla synth stats`: the yield of each stage and the seconds per valid task.
#include <filesystem>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/status.h"
#include "flotilla/synth/synth_state.h"
#include "flotilla/synth/synthesizer.h"

namespace flotilla::synth {
namespace {

// Reasons grouped by their stable head ("probe oracle", "no fail-to-pass test", ...).
std::string ReasonGroup(const std::string& reason) {
  size_t cut = reason.find_first_of(":(0123456789");
  std::string head = reason.substr(0, cut);
  while (!head.empty() && (head.back() == ' ' || head.back() == ',')) head.pop_back();
  return head.empty() ? reason.substr(0, 40) : head;
}

double Pct(int a, int b) { return b == 0 ? 0.0 : 100.0 * a / b; }

}  // namespace

absl::StatusOr<std::string> SynthStats(const std::string& out_dir) {
  std::string db = (std::filesystem::path(out_dir) / "synth.db").string();
  std::error_code ec;
  if (!std::filesystem::exists(db, ec)) return absl::NotFoundError(absl::StrCat(db, ": no synthesis state here"));
  ASSIGN_OR_RETURN(std::unique_ptr<SynthState> st, SynthState::Open(db));
  ASSIGN_OR_RETURN(auto cands, st->Candidates());
  ASSIGN_OR_RETURN(auto stages, st->StageSeconds());
  int generated = static_cast<int>(cands.size()), tried = 0, passed = 0, valid = 0;
  std::map<std::string, int> reasons;
  std::map<std::string, std::pair<int, int>> by_kind;  // kind -> (tried, valid)
  for (const CandidateRow& c : cands) {
    if (c.state == "generated") continue;
    ++tried;
    by_kind[c.kind].first++;
    if (c.state == "valid" || c.state == "dropped" || c.state == "validated") ++passed;
    if (c.state == "valid") {
      ++valid;
      by_kind[c.kind].second++;
    }
    if (c.state == "rejected" || c.state == "dropped") reasons[ReasonGroup(c.reason)]++;
  }
  double total = 0, env = 0;
  int runs = 0;
  for (const auto& [name, secs] : stages) {
    if (absl::StartsWith(name, "run-")) {
      total += secs;
      ++runs;
    }
    if (name == "environment") env = secs;
  }
  std::ostringstream o;
  o << absl::StrFormat("synth stats: %s (%d runs, %.1f s)\n", out_dir, runs, total);
  o << absl::StrFormat("  environment: baseline %.1f s\n", env);
  o << absl::StrFormat("  sources:     %d candidates generated\n", generated);
  o << absl::StrFormat("  validate:    %d tried, %d passed (%.1f %%)\n", tried, passed, Pct(passed, tried));
  o << absl::StrFormat("  probe:       %d written, %d valid (%.1f %%)\n", passed, valid, Pct(valid, passed));
  o << absl::StrFormat("  overall:     %d valid of %d tried (%.1f %%)\n", valid, tried, Pct(valid, tried));
  for (const auto& [kind, tv] : by_kind) {
    o << absl::StrFormat("  kind %-16s %d tried, %d valid\n", kind, tv.first, tv.second);
  }
  for (const auto& [reason, n] : reasons) o << absl::StrFormat("  rejected %4d  %s\n", n, reason);
  // The difficulty stage's labels per policy, and the tasks its band moved out (difficulty.h).
  ASSIGN_OR_RETURN(std::vector<DifficultyRow> difficulty, st->Difficulties());
  std::map<std::string, std::map<std::string, int>> labels;
  for (const DifficultyRow& d : difficulty) labels[d.policy][d.label]++;
  for (auto& [policy, n] : labels) {
    o << absl::StrFormat("  difficulty:  %s: easy=%d medium=%d hard=%d unsolved=%d\n", policy, n["easy"], n["medium"],
                         n["hard"], n["unsolved"]);
  }
  int excluded = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(out_dir) / "excluded", ec)) {
    excluded += std::filesystem::exists(e.path() / "task.toml", ec) ? 1 : 0;
  }
  if (excluded > 0) o << absl::StrFormat("  excluded:    %d tasks outside the difficulty band (excluded/)\n", excluded);
  if (valid > 0) {
    o << absl::StrFormat("seconds_per_valid_task=%.1f valid=%d tried=%d yield=%.3f\n", total / valid, valid, tried,
                         static_cast<double>(valid) / tried);
  } else {
    o << absl::StrFormat("seconds_per_valid_task=inf valid=0 tried=%d yield=0.000\n", tried);
  }
  return o.str();
}

}  // namespace flotilla::synth
