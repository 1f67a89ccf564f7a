#include "flotilla/synth/synthesizer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "candidate_files.h"
#include "commit_miner.h"
#include "deb_cache.h"
#include "flotilla/common/text_files.h"
#include "flotilla/synth/c_mutator.h"
#include "flotilla/synth/synth_state.h"
#include "flotilla/synth/test_results.h"
#include "nlohmann/json.hpp"
#include "model_rewriter.h"
#include "probes.h"
#include "project_profile.h"
#include "statement_writer.h"
#include "synth_model.h"
#include "task_writer.h"
#include "test_sandbox.h"

namespace flotilla::synth {

extern const char kPyMutateScript[];

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) absl::StrAppendFormat(&hex, "%02x", md[i]);
  return hex;
}

std::string SafeName(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(c)));
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '-';
  }
  return s;
}

// Package name and version from debian/changelog's first line: "name (version) suite; ...".
std::pair<std::string, std::string> DebianIdentity(const std::string& repo) {
  std::string first = ReadFileOrEmpty(fs::path(repo) / "debian" / "changelog");
  first = first.substr(0, first.find('\n'));
  size_t open = first.find(" ("), close = first.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return {"", ""};
  return {first.substr(0, open), first.substr(open + 2, close - open - 2)};
}

TestReport ParseReport(const ProjectProfile& p, const std::string& out) {
  return p.language == "python" ? ParsePytestReport(out) : ParseAutomakeReport(out);
}

struct Baseline {
  std::map<std::string, TestOutcome> stable;  // tests with one outcome in all three runs
  std::vector<std::string> flaky;
  double seconds = 0;                         // the slowest run
  double median_seconds = 0;                  // the middle one (the first often builds what the others reuse)
  std::string hidden_sha256;
  std::string runner_sha256;
  std::string base_files;

  std::string ToJson() const {
    nlohmann::json j;
    for (const auto& [t, o] : stable) j["stable"][t] = std::string(TestOutcomeName(o));
    j["flaky"] = flaky;
    j["seconds"] = seconds;
    j["median_seconds"] = median_seconds;
    j["hidden_sha256"] = hidden_sha256;
    j["runner_sha256"] = runner_sha256;
    j["base_files"] = base_files;
    return j.dump();
  }
  static absl::StatusOr<Baseline> FromJson(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return absl::DataLossError("synth.db: stages.environment: not JSON");
    Baseline b;
    if (j.contains("stable")) {
      for (auto& [t, o] : j["stable"].items()) {
        std::string s = o.get<std::string>();
        b.stable[t] = s == "pass" ? TestOutcome::kPass : s == "fail" ? TestOutcome::kFail : TestOutcome::kSkip;
      }
    }
    b.flaky = j.value("flaky", std::vector<std::string>());
    b.seconds = j.value("seconds", 0.0);
    b.median_seconds = j.value("median_seconds", b.seconds);
    b.hidden_sha256 = j.value("hidden_sha256", "");
    b.runner_sha256 = j.value("runner_sha256", "");
    b.base_files = j.value("base_files", "");
    return b;
  }
};

class Run {
 public:
  Run(const SynthOptions& o, const std::function<void(std::string_view)>& progress) : o_(o), progress_(progress) {}

  absl::StatusOr<SynthSummary> Go();

 private:
  void Say(const std::string& line) {
    if (progress_) progress_(line + "\n");
  }
  absl::Status Decide(const std::string& stage, const std::string& subject, const std::string& decision,
                      const std::string& reason) {
    Say(absl::StrCat("synth: ", stage, ": ", subject, ": ", decision, " (", reason, ")"));
    return state_->Decide(stage, subject, decision, reason);
  }
  // Records the refusal, writes REPORT.txt and returns the error.
  absl::Status Refuse(const std::string& stage, const absl::Status& why);

  absl::Status EnvironmentStage();
  absl::Status SaveHiddenTests();
  std::string HiddenDir() const { return (fs::path(o_.out) / ".work" / "hidden").string(); }
  absl::Status SourcesStage();
  absl::StatusOr<std::vector<CandidateRow>> ModelRewrites();
  // Commit mining (commit_miner.h): the candidates of the git history and debian/patches, every
  // skipped commit or patch recorded with its reason.
  absl::StatusOr<std::vector<CandidateRow>> MineFixes();
  absl::Status ValidateOne(CandidateRow& c);
  absl::Status WriteAndProbe(CandidateRow& c, int index);
  absl::StatusOr<ShellRun> RunSuite(uint32_t timeout_ms) { return sandbox_->Run(profile_.test_script, timeout_ms); }
  // A broken state's suite: a mutation that loops forever costs this much, so it follows the
  // typical run, not the slowest (libmd: 0.8 s typical, 16.7 s for the first run that builds).
  uint32_t SuiteTimeoutMs() const { return static_cast<uint32_t>((baseline_.median_seconds * 4 + 60) * 1000); }
  // A probe runs the whole verifier (for C a clean build first), in a fresh sandbox.
  uint32_t ProbeTimeoutMs() const {
    return std::max<uint32_t>(static_cast<uint32_t>((baseline_.seconds * 4 + 60) * 2000), 600 * 1000);
  }

  const SynthOptions& o_;
  std::function<void(std::string_view)> progress_;
  std::unique_ptr<SynthState> state_;
  ProjectProfile profile_;
  std::string package_, version_;
  std::unique_ptr<environments::EnvBuilder> builder_;
  std::string base_top_;
  std::string debs_dir_;
  std::unique_ptr<TestSandbox> sandbox_;
  Baseline baseline_;
  std::unique_ptr<SynthModel> model_;  // with options.model_endpoint
};

absl::Status Run::Refuse(const std::string& stage, const absl::Status& why) {
  (void)Decide(stage, o_.repo, "refused", std::string(why.message()));
  std::ostringstream r;
  r << "flotilla synth: no tasks from " << o_.repo << "\n";
  auto ds = state_->Decisions();
  if (ds.ok()) {
    for (const DecisionRow& d : *ds) r << d.stage << ": " << d.subject << ": " << d.decision << " (" << d.reason << ")\n";
  }
  // What was tried: every candidate's outcome, grouped by its reason, with an example each.
  auto cs = state_->Candidates();
  if (cs.ok()) {
    std::map<std::string, std::pair<int, std::string>> by_reason;
    int tried = 0;
    for (const CandidateRow& c : *cs) {
      if (c.state == "generated") continue;
      ++tried;
      auto& [n, example] = by_reason[absl::StrCat(c.state, ": ", c.reason.substr(0, 160))];
      if (n++ == 0) example = absl::StrCat(c.kind, " ", c.file, ":", c.line);
    }
    if (tried > 0) {
      r << "candidates tried: " << tried << " of " << cs->size() << " generated\n";
      for (const auto& [reason, n_example] : by_reason) {
        r << "  " << n_example.first << " x " << reason << " (e.g. " << n_example.second << ")\n";
      }
    }
  }
  std::ofstream(fs::path(o_.out) / "REPORT.txt") << r.str();
  return why;
}

absl::Status Run::EnvironmentStage() {
  auto t0 = Clock::now();
  auto profile = DetectProject(o_.repo);
  if (!profile.ok()) return Refuse("environment", profile.status());
  profile_ = *profile;
  ASSIGN_OR_RETURN(std::optional<std::string> done, state_->StageResult("environment"));
  if (!done) {
    for (const std::string& r : profile_.reasons) {
      RETURN_IF_ERROR(Decide("environment", "language", profile_.language + "/" + profile_.runner, r));
    }
  }
  // The environment at the base state: the build is cached, so a resumed run rebuilds nothing.
  fs::path ctx = fs::path(o_.out) / ".work" / "base-env";
  std::error_code ec;
  if (!fs::exists(ctx / "Dockerfile", ec)) {
    fs::remove_all(ctx, ec);
    RETURN_IF_ERROR(CopyRepoTree(o_.repo, (ctx / "repo").string()));
  }
  std::ofstream(ctx / "Dockerfile") << ProjectDockerfile(profile_, false);
  // The synthesizer waits on each task's build, as on its suite runs (test_sandbox.cc).
  environments::EnvBuilderOptions bopts = o_.builder;
  bopts.execution_class = sandbox::ExecutionClass::kLatencySensitive;
  builder_ = std::make_unique<environments::EnvBuilder>(bopts);
  // The base root filesystem decides which packages the environment still needs.
  fs::path from_only = fs::path(o_.out) / ".work" / "base-only";
  fs::create_directories(from_only, ec);
  std::ofstream(from_only / "Dockerfile") << "FROM debian:bookworm-slim\n";
  auto base = builder_->Build(from_only.string(), (from_only / "Dockerfile").string(), {});
  if (!base.ok()) return Refuse("environment", base.status());
  if (base->image.top.rfind("dir:", 0) != 0) {
    return Refuse("environment", absl::InternalError("debian:bookworm-slim is not a root filesystem: " + base->image.top));
  }
  auto debs = FetchDebs(profile_.packages, base->image.top.substr(4), o_.builder.store_dir + "/synth-debs");
  if (!debs.ok()) return Refuse("environment", debs.status());
  debs_dir_ = *debs;
  RETURN_IF_ERROR(LinkDebs(debs_dir_, (ctx / "debs").string()));
  environments::BuildOptions bo;
  bo.tag = SafeName("synth-" + package_ + "-base");
  bo.progress = [this](std::string_view l) { Say("  build: " + std::string(l)); };
  auto built = builder_->Build(ctx.string(), (ctx / "Dockerfile").string(), bo);
  if (!built.ok()) {
    return Refuse("environment", absl::FailedPreconditionError(
                                     absl::StrCat("the environment does not build: ", built.status().message())));
  }
  base_top_ = built->image.top;
  ASSIGN_OR_RETURN(sandbox_, TestSandbox::Start(*o_.sandboxes, base_top_));
  if (done) {
    ASSIGN_OR_RETURN(baseline_, Baseline::FromJson(*done));
    Say(absl::StrCat("synth: environment: resumed (", baseline_.stable.size(), " tests in the baseline)"));
    return SaveHiddenTests();
  }
  // Three runs at the base state: a test whose outcome changes is flaky and never used.
  std::vector<TestReport> runs;
  std::vector<double> seconds;
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(ShellRun r, sandbox_->Run(profile_.test_script, 1800 * 1000));
    if (r.timed_out) return Refuse("environment", absl::DeadlineExceededError("the test suite ran past 30 minutes"));
    TestReport rep = ParseReport(profile_, r.output);
    if (rep.outcomes.empty()) {
      std::string tail = r.output.size() > 1500 ? r.output.substr(r.output.size() - 1500) : r.output;
      return Refuse("environment", absl::FailedPreconditionError(absl::StrCat(
                                       "the test suite reported no tests (exit status ", r.exit_code, "): ", tail)));
    }
    baseline_.seconds = std::max(baseline_.seconds, r.seconds);
    seconds.push_back(r.seconds);
    Say(absl::StrFormat("synth: environment: base run %d: %d passed, %d failed, %d skipped in %.1f s", i + 1,
                        rep.Count(TestOutcome::kPass), rep.Count(TestOutcome::kFail), rep.Count(TestOutcome::kSkip),
                        r.seconds));
    runs.push_back(std::move(rep));
  }
  std::sort(seconds.begin(), seconds.end());
  baseline_.median_seconds = seconds[1];
  std::set<std::string> all;
  for (const auto& r : runs) {
    for (const auto& [t, o] : r.outcomes) all.insert(t);
  }
  for (const std::string& t : all) {
    std::set<TestOutcome> seen;
    for (const auto& r : runs) {
      auto it = r.outcomes.find(t);
      seen.insert(it == r.outcomes.end() ? TestOutcome::kSkip : it->second);
    }
    if (seen.size() == 1) {
      baseline_.stable[t] = *seen.begin();
    } else {
      baseline_.flaky.push_back(t);
    }
  }
  int passing = 0;
  for (const auto& [t, o] : baseline_.stable) passing += o == TestOutcome::kPass ? 1 : 0;
  double rate = static_cast<double>(passing) / static_cast<double>(all.size());
  if (!baseline_.flaky.empty()) {
    RETURN_IF_ERROR(Decide("environment", "flaky tests", "dropped",
                           absl::StrCat(baseline_.flaky.size(), " changed outcome across 3 runs: ",
                                        absl::StrJoin(baseline_.flaky.begin(),
                                                      baseline_.flaky.begin() + std::min<size_t>(5, baseline_.flaky.size()),
                                                      ", "))));
  }
  if (rate < 0.8) {
    return Refuse("environment", absl::FailedPreconditionError(absl::StrFormat(
                                     "only %d of %d tests pass at the base state (%.0f %% < 80 %%)", passing,
                                     static_cast<int>(all.size()), rate * 100)));
  }
  RETURN_IF_ERROR(Decide("environment", o_.repo, "accepted",
                         absl::StrFormat("%d of %d tests pass at the base state (%.1f %% >= 80 %%), suite %.1f s",
                                         passing, static_cast<int>(all.size()), rate * 100, baseline_.seconds)));
  std::vector<std::string> quoted;
  for (const std::string& t : profile_.test_files) quoted.push_back(ShellQuote(t));
  ASSIGN_OR_RETURN(ShellRun h, sandbox_->Run(absl::StrCat("cd /app && sha256sum ", absl::StrJoin(quoted, " ")), 60000));
  if (h.exit_code != 0) return Refuse("environment", absl::InternalError("hashing the test files: " + h.output));
  baseline_.hidden_sha256 = h.output;
  RETURN_IF_ERROR(SaveHiddenTests());
  ASSIGN_OR_RETURN(ShellRun f, sandbox_->Run(RunnerFingerprintScript(), 120000));
  baseline_.runner_sha256 = std::string(absl::StripAsciiWhitespace(f.output));
  ASSIGN_OR_RETURN(ShellRun b, sandbox_->Run("find /app -name .git -prune -o \\( -name '*.py' -o -name '*.pth' \\) "
                                             "-print | sed 's|^/app/||' | sort", 60000));
  baseline_.base_files = b.output;
  return state_->CompleteStage("environment", baseline_.ToJson(), Since(t0));
}

// The test files as the built base environment has them (hashed in the baseline), kept under
// .work/hidden for every task's tests/hidden/; done once per output folder.
absl::Status Run::SaveHiddenTests() {
  fs::path dir = HiddenDir();
  std::error_code ec;
  if (fs::exists(dir / ".complete", ec)) return absl::OkStatus();
  fs::remove_all(dir, ec);
  // Their modes too (an executable configure or config.status stays executable).
  std::vector<std::string> quoted;
  for (const std::string& t : profile_.test_files) quoted.push_back(ShellQuote(t));
  ASSIGN_OR_RETURN(ShellRun x, sandbox_->Run(absl::StrCat("cd /app && for f in ", absl::StrJoin(quoted, " "),
                                                          "; do [ -x \"$f\" ] && echo \"$f\"; done; true"),
                                             60000));
  std::set<std::string> executable;
  for (absl::string_view l : absl::StrSplit(x.output, '\n', absl::SkipEmpty())) executable.insert(std::string(l));
  for (const std::string& t : profile_.test_files) {
    auto content = sandbox_->Get("/app/" + t);
    if (!content.ok()) {
      return Refuse("environment", absl::InternalError(absl::StrCat("reading ", t, " from the base environment: ",
                                                                    content.status().message())));
    }
    fs::create_directories((dir / t).parent_path(), ec);
    std::ofstream(dir / t, std::ios::binary) << *content;
    fs::permissions(dir / t, executable.count(t) ? fs::perms(0755) : fs::perms(0644), ec);
  }
  std::ofstream(dir / ".complete") << "";
  return absl::OkStatus();
}

absl::Status Run::SourcesStage() {
  ASSIGN_OR_RETURN(std::optional<std::string> done, state_->StageResult("sources"));
  if (done) return absl::OkStatus();
  auto t0 = Clock::now();
  std::vector<SourceEdit> edits;
  if (profile_.language == "python") {
    RETURN_IF_ERROR(sandbox_->Put("/tmp/py_mutate.py", kPyMutateScript, 0644));
    std::vector<std::string> files;
    for (const std::string& f : profile_.source_files) files.push_back(ShellQuote(f));
    ASSIGN_OR_RETURN(ShellRun r, sandbox_->Run(absl::StrCat("python3 -B /tmp/py_mutate.py /app ",
                                                            absl::StrJoin(files, " ")), 300000));
    if (r.exit_code != 0) return Refuse("sources", absl::InternalError("py_mutate.py failed: " + r.output.substr(0, 2000)));
    for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      if (j.contains("error")) {
        RETURN_IF_ERROR(Decide("sources", j.value("file", ""), "skipped", "does not parse: " + j.value("error", "")));
        continue;
      }
      edits.push_back(SourceEdit{j.value("file", ""), j.value("kind", ""), j.value("line", 0),
                                 j.value("start", size_t{0}), j.value("end", size_t{0}), j.value("replacement", ""),
                                 j.value("description", "")});
    }
  } else {
    for (const std::string& f : profile_.source_files) {
      std::vector<SourceEdit> e = MutateC(f, ReadFileOrEmpty(fs::path(o_.repo) / f));
      edits.insert(edits.end(), e.begin(), e.end());
    }
  }
  std::mt19937_64 rng(o_.seed);
  std::shuffle(edits.begin(), edits.end(), rng);
  // Real fixes are tried first, in history order; the mutations follow.
  ASSIGN_OR_RETURN(std::vector<CandidateRow> rows, MineFixes());
  size_t mined = rows.size();
  std::map<std::string, int> per_kind;
  for (const SourceEdit& e : edits) {
    CandidateRow c;
    c.id = absl::StrCat(e.kind, "-", Sha256Hex(e.file).substr(0, 8), "-", e.start);
    c.source = "mutation";
    c.kind = e.kind;
    c.file = e.file;
    c.line = e.line;
    c.start = static_cast<int64_t>(e.start);
    c.end = static_cast<int64_t>(e.end);
    c.replacement = e.replacement;
    c.description = e.description;
    per_kind[e.kind]++;
    rows.push_back(std::move(c));
  }
  // Model rewrites are few and cost a request each: they are tried right after the real fixes.
  ASSIGN_OR_RETURN(std::vector<CandidateRow> rewrites, ModelRewrites());
  rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(mined), rewrites.begin(), rewrites.end());
  RETURN_IF_ERROR(state_->AddCandidates(rows));
  std::vector<std::string> kinds;
  for (const auto& [k, n] : per_kind) kinds.push_back(absl::StrCat(k, "=", n));
  RETURN_IF_ERROR(Decide("sources", "procedural mutation", "generated",
                         absl::StrCat(edits.size(), " candidates from ", profile_.source_files.size(), " files (",
                                      absl::StrJoin(kinds, " "), ")")));
  return state_->CompleteStage("sources", absl::StrCat(rows.size()), Since(t0));
}

// Rewrites by the model (model_rewriter.h), each reply's verdict recorded.
absl::StatusOr<std::vector<CandidateRow>> Run::ModelRewrites() {
  std::vector<CandidateRow> rows;
  if (model_ == nullptr) {
    RETURN_IF_ERROR(Decide("sources", "model-written rewrites", "skipped",
                           o_.model.empty() ? "no model configured" : "no worker endpoint for --model " + o_.model));
    return rows;
  }
  std::unique_ptr<ProjectShell> shell = SandboxShell(*sandbox_);
  std::vector<std::string> skipped;
  ASSIGN_OR_RETURN(std::vector<FunctionSpan> fns,
                   ListFunctions(*shell, profile_.language, o_.repo, profile_.source_files, &skipped));
  for (const std::string& s : skipped) RETURN_IF_ERROR(Decide("sources", s, "skipped", "does not parse"));
  RewriteOptions ro;
  ro.max_functions = o_.model_rewrites;
  ro.seed = o_.seed;
  for (const RewriteOutcome& r : ProposeRewrites(*model_, *shell, profile_.language, o_.repo, fns, ro)) {
    RETURN_IF_ERROR(Decide("sources", absl::StrCat("model rewrite ", r.function.file, ":", r.function.line, " ",
                                                   r.function.name),
                           r.usable ? "generated" : "unusable",
                           absl::StrFormat("%s; %.1f s; reply (%d bytes): %s", r.reason, r.seconds, r.reply.size(),
                                           ReplyExcerpt(r.reply, 300))));
    if (!r.usable) continue;
    CandidateRow c;
    c.id = absl::StrCat("rewrite-", Sha256Hex(r.edit.file).substr(0, 8), "-", r.edit.start);
    c.source = "model rewrite";
    c.kind = "rewrite";
    c.file = r.edit.file;
    c.line = r.edit.line;
    c.start = static_cast<int64_t>(r.edit.start);
    c.end = static_cast<int64_t>(r.edit.end);
    c.replacement = r.edit.replacement;
    c.description = absl::StrCat(r.edit.description, " by ", model_->name());
    rows.push_back(std::move(c));
  }
  RETURN_IF_ERROR(Decide("sources", "model-written rewrites", "generated",
                         absl::StrCat(rows.size(), " candidates from ", std::min<size_t>(fns.size(), ro.max_functions),
                                      " functions asked of ", fns.size(), " (model ", model_->name(), ")")));
  return rows;
}

// Commit mining (commit_miner.h): the candidates of the git history and debian/patches.
absl::StatusOr<std::vector<CandidateRow>> Run::MineFixes() {
  std::vector<CandidateRow> rows;
  std::error_code ec;
  MiningOptions mo;
  mo.max_commits = o_.mine_commits;
  std::vector<std::pair<std::string, absl::StatusOr<MiningResult>>> supplies;
  if (!fs::exists(fs::path(o_.repo) / ".git", ec)) {
    RETURN_IF_ERROR(Decide("sources", "commit mining", "skipped", "no git history (no .git in the source tree)"));
  } else if (o_.mine_commits <= 0) {
    RETURN_IF_ERROR(Decide("sources", "commit mining", "skipped", "--mine-commits 0"));
  } else {
    supplies.emplace_back("commit mining", MineCommits(o_.repo, profile_, mo));
  }
  if (fs::exists(fs::path(o_.repo) / "debian" / "patches" / "series", ec)) {
    supplies.emplace_back("debian patch mining", MineDebianPatches(o_.repo, profile_, mo));
  }
  for (auto& [what, result] : supplies) {
    if (!result.ok()) {
      RETURN_IF_ERROR(Decide("sources", what, "skipped", std::string(result.status().message())));
      continue;
    }
    std::map<std::string, int> by_reason;
    for (const MiningSkip& k : result->skips) {
      // Recorded one by one (synth.db), summarized on the terminal.
      RETURN_IF_ERROR(state_->Decide("sources", absl::StrCat(k.kind, " ", k.ref, " ", k.subject.substr(0, 80)),
                                     "skipped", k.reason));
      by_reason[k.reason.substr(0, k.reason.find_first_of(":("))]++;
    }
    for (const MinedFix& f : result->fixes) {
      rows.push_back(MinedCandidate(f));
      RETURN_IF_ERROR(state_->Decide("sources", absl::StrCat(f.kind, " ", f.ref, " ", f.subject.substr(0, 80)),
                                     "generated", rows.back().description));
    }
    std::vector<std::string> reasons;
    for (const auto& [r, n] : by_reason) reasons.push_back(absl::StrCat(n, " ", absl::StripAsciiWhitespace(r)));
    RETURN_IF_ERROR(Decide("sources", what, "generated",
                           absl::StrCat(result->fixes.size(), " candidates from ", result->looked_at, " examined",
                                        reasons.empty() ? "" : "; skipped: ", absl::StrJoin(reasons, ", "))));
  }
  return rows;
}

absl::Status Run::ValidateOne(CandidateRow& c) {
  auto t0 = Clock::now();
  auto change = CandidateFiles(c, o_.repo);
  if (!change.ok()) {
    c.state = "rejected";
    c.reason = std::string(change.status().message());
    return state_->UpdateCandidate(c);
  }
  absl::Status put = absl::OkStatus();
  for (const FileChange& f : change->files) {
    if (put.ok()) put = sandbox_->Put("/app/" + f.file, f.broken, 0644);
  }
  auto run = put.ok() ? RunSuite(SuiteTimeoutMs()) : absl::StatusOr<ShellRun>(put);
  absl::Status restore = absl::OkStatus();
  for (const FileChange& f : change->files) restore.Update(sandbox_->Put("/app/" + f.file, f.fixed, 0644));
  RETURN_IF_ERROR(run.status());
  RETURN_IF_ERROR(restore);
  c.seconds = Since(t0);
  if (run->timed_out) {
    c.state = "rejected";
    c.reason = absl::StrFormat("the suite ran past %.0f s at the broken state", SuiteTimeoutMs() / 1000.0);
    return state_->UpdateCandidate(c);
  }
  TestReport rep = ParseReport(profile_, run->output);
  std::vector<std::string> f2p, p2p, messages;
  int base_passing = 0;
  for (const auto& [t, o] : baseline_.stable) {
    if (o != TestOutcome::kPass) continue;
    ++base_passing;
    auto it = rep.outcomes.find(t);
    if (it != rep.outcomes.end() && it->second == TestOutcome::kPass) {
      p2p.push_back(t);
    } else {
      f2p.push_back(t);
      auto m = rep.messages.find(t);
      messages.push_back(absl::StrCat(t, ": ", m == rep.messages.end() ? (it == rep.outcomes.end() ? "not run" : "failed")
                                                                        : m->second));
    }
  }
  c.fail_to_pass = absl::StrJoin(f2p, "\n");
  c.pass_to_pass = absl::StrJoin(p2p, "\n");
  c.messages = absl::StrJoin(messages, "\n");
  if (rep.outcomes.empty()) {
    c.state = "rejected";
    c.reason = "the suite reported no tests at the broken state (build or collection failed)";
  } else if (f2p.empty()) {
    c.state = "rejected";
    c.reason = "no fail-to-pass test: every test passes with the bug";
  } else if (f2p.size() * 2 > static_cast<size_t>(base_passing)) {
    c.state = "rejected";
    c.reason = absl::StrCat("breaks ", f2p.size(), " of ", base_passing, " passing tests: too broad to be a task");
  } else {
    c.state = "validated";
    c.reason = absl::StrCat(f2p.size(), " fail-to-pass, ", p2p.size(), " pass-to-pass");
  }
  return state_->UpdateCandidate(c);
}

absl::Status Run::WriteAndProbe(CandidateRow& c, int index) {
  auto t0 = Clock::now();
  ASSIGN_OR_RETURN(CandidateChange change, CandidateFiles(c, o_.repo));
  TaskSpec spec;
  spec.name = SafeName(absl::StrFormat("%s-%03d-%s", package_, index, c.kind));
  spec.package = package_;
  spec.version = version_;
  spec.source = c.source;
  spec.kind = c.kind;
  spec.file = change.files[0].file;
  spec.fixed_content = change.files[0].fixed;
  spec.broken_content = change.files[0].broken;
  std::string listing;
  for (const FileChange& f : change.files) {
    absl::StrAppend(&listing, f.file, "\n", f.broken);
    if (f.file != spec.file) spec.other_files.push_back({f.file, f.fixed, f.broken});
  }
  spec.base_hash = Sha256Hex(listing);
  spec.origin_ref = change.ref;
  spec.origin_subject = change.subject;
  spec.fail_to_pass = absl::StrSplit(c.fail_to_pass, '\n', absl::SkipEmpty());
  spec.pass_to_pass = absl::StrSplit(c.pass_to_pass, '\n', absl::SkipEmpty());
  for (absl::string_view m : absl::StrSplit(c.messages, '\n', absl::SkipEmpty())) {
    size_t colon = m.find(": ");
    if (colon != absl::string_view::npos) spec.messages[std::string(m.substr(0, colon))] = std::string(m.substr(colon + 2));
  }
  spec.hidden_sha256 = baseline_.hidden_sha256;
  spec.runner_sha256 = baseline_.runner_sha256;
  spec.base_files = baseline_.base_files;
  spec.debs_dir = debs_dir_;
  spec.hidden_dir = HiddenDir();
  spec.timings["validate_seconds"] = c.seconds;
  spec.timings["suite_seconds"] = baseline_.seconds;
  if (model_ != nullptr) {
    // The leak check compares line sets, so a fix over several files is checked as one text.
    std::string fixed_all, broken_all;
    for (const FileChange& f : change.files) {
      absl::StrAppend(&fixed_all, f.fixed, "\n");
      absl::StrAppend(&broken_all, f.broken, "\n");
    }
    StatementOutcome st = WriteStatement(
        *model_, {package_, profile_.language, spec.fail_to_pass, spec.messages, fixed_all, broken_all});
    spec.statement = st.statement;
    spec.timings["statement_seconds"] = st.seconds;
    RETURN_IF_ERROR(Decide("statement", c.id, st.statement.empty() ? "deterministic" : "model",
                           st.statement.empty() ? absl::StrCat("model statement refused: ", st.reason, "; reply: ",
                                                               ReplyExcerpt(st.reply, 300))
                                                : st.reason));
  }
  fs::path dir = fs::path(o_.out) / spec.name;
  RETURN_IF_ERROR(WriteTask(dir.string(), o_.repo, profile_, spec));

  // Lines of the fix found nowhere in the broken tree: none may be findable by the agent.
  std::set<std::string> broken_lines;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "environment" / "repo", ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    for (absl::string_view l : absl::StrSplit(ReadFileOrEmpty(it->path()), '\n')) {
      broken_lines.insert(std::string(absl::StripAsciiWhitespace(l)));
    }
  }
  std::vector<std::string> unique;
  for (const FileChange& f : change.files) {
    for (absl::string_view l : absl::StrSplit(f.fixed, '\n')) {
      std::string s(absl::StripAsciiWhitespace(l));
      if (s.size() >= 4 && broken_lines.count(s) == 0) unique.push_back(s);
    }
  }
  environments::BuildOptions bo;
  bo.tag = SafeName("synth-" + spec.name);
  auto built = builder_->Build((dir / "environment").string(), (dir / "environment" / "Dockerfile").string(), bo);
  auto drop = [&](const std::string& why) -> absl::Status {
    fs::remove_all(dir, ec);
    c.state = "dropped";
    c.reason = why;
    c.seconds += Since(t0);
    RETURN_IF_ERROR(state_->UpdateCandidate(c));
    return Decide("repair", c.id, "dropped", why + "; the next mutation takes its place");
  };
  if (!built.ok()) return drop(absl::StrCat("the task environment does not build: ", built.status().message()));
  ASSIGN_OR_RETURN(std::vector<ProbeResult> probes,
                   ProbeTask(*o_.sandboxes, built->image.top, dir.string(), profile_, spec, unique, ProbeTimeoutMs()));
  for (const ProbeResult& p : probes) {
    if (!p.ok) {
      return drop(absl::StrFormat("probe %s: reward %g, expected %s: %s", p.name, p.reward,
                                  p.name == "oracle" ? "1" : "0", p.detail));
    }
  }
  // Timings of the write and probe stages go into task.toml's [synth.timings] too.
  spec.timings["write_probe_seconds"] = Since(t0);
  RETURN_IF_ERROR(WriteTask(dir.string(), o_.repo, profile_, spec));
  c.state = "valid";
  c.reason = absl::StrCat("oracle 1; nop, delete-tests, edit-tests, replace-runner",
                          profile_.language == "c" ? ", shadow-makefile" : "", " 0; no leak (", unique.size(),
                          " fix lines searched)");
  c.seconds += Since(t0);
  RETURN_IF_ERROR(state_->UpdateCandidate(c));
  return Decide("probe", c.id, "valid", absl::StrCat(spec.name, ": ", c.reason));
}

absl::StatusOr<SynthSummary> Run::Go() {
  std::error_code ec;
  fs::create_directories(o_.out, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--out '", o_.out, "': ", ec.message()));
  ASSIGN_OR_RETURN(state_, SynthState::Open((fs::path(o_.out) / "synth.db").string()));
  auto [pkg, ver] = DebianIdentity(o_.repo);
  package_ = !o_.package.empty() ? o_.package : !pkg.empty() ? pkg : fs::path(o_.repo).lexically_normal().filename().string();
  if (package_.empty()) package_ = fs::absolute(o_.repo).parent_path().filename().string();
  version_ = !o_.version.empty() ? o_.version : ver;
  auto t_start = Clock::now();
  if (!o_.model_endpoint.empty()) {
    ASSIGN_OR_RETURN(model_, SynthModel::Connect({o_.model_endpoint, o_.model_name, o_.model_timeout_ms,
                                                  o_.model_max_tokens, 0.7f, o_.seed}));
  }
  RETURN_IF_ERROR(EnvironmentStage());
  RETURN_IF_ERROR(SourcesStage());
  const bool measure = !o_.difficulty.agent.empty() && o_.difficulty.attempts > 0;
  if (!measure) {
    RETURN_IF_ERROR(Decide("difficulty", "solve rate", "unknown",
                           o_.difficulty.agent.empty()
                               ? (o_.model.empty() ? "no model configured: difficulty is not measured"
                                                   : "no difficulty agent configured: difficulty is not measured")
                               : "--difficulty-attempts 0: difficulty is not measured"));
  }
  ASSIGN_OR_RETURN(std::vector<CandidateRow> cands, state_->Candidates());
  int valid = 0, tried = 0, validated = 0;
  for (const CandidateRow& c : cands) {
    valid += c.state == "valid" ? 1 : 0;
    tried += c.state != "generated" ? 1 : 0;
  }
  for (CandidateRow& c : cands) {
    if (valid >= o_.max_tasks || tried >= o_.max_candidates) break;
    if (c.state == "generated") {
      ++tried;
      RETURN_IF_ERROR(ValidateOne(c));
      Say(absl::StrFormat("synth: validate [%d/%d] %s %s:%d %s: %s", tried, o_.max_candidates, c.kind, c.file, c.line,
                          c.state, c.reason));
    }
    if (c.state == "validated") {
      ++validated;
      RETURN_IF_ERROR(WriteAndProbe(c, valid + 1));
      if (c.state == "valid") ++valid;
      Say(absl::StrFormat("synth: probe %s: %s (%d/%d valid)", c.id, c.reason, valid, o_.max_tasks));
    }
  }
  // Each run's wall time (stats sum them: a resumed synthesis counts every run).
  RETURN_IF_ERROR(state_->CompleteStage(
      absl::StrCat("run-", std::chrono::system_clock::now().time_since_epoch().count()), absl::StrCat(valid),
      Since(t_start)));
  if (valid == 0) {
    return Refuse("validate", absl::FailedPreconditionError(absl::StrCat(
                                  "no candidate became a valid task after ", tried, " tries (",
                                  cands.size(), " generated); the reasons are in synth.db and REPORT.txt")));
  }
  std::string difficulty;
  int excluded = 0;
  if (measure) {
    ASSIGN_OR_RETURN(DifficultySummary d,
                     MeasureDifficulty(o_.difficulty, o_.out, *state_, *builder_, *o_.sandboxes, progress_));
    difficulty = d.report;
    excluded = d.excluded;
  }
  ASSIGN_OR_RETURN(std::string stats, SynthStats(o_.out));
  SynthSummary s;
  s.excluded = excluded;
  s.candidates = static_cast<int>(cands.size());
  s.tried = tried;
  s.validated = validated;
  s.valid = valid;
  s.report = stats + difficulty;
  return s;
}

}  // namespace

absl::StatusOr<SynthSummary> RunSynth(const SynthOptions& options,
                                      const std::function<void(std::string_view)>& progress) {
  if (options.repo.empty()) return absl::InvalidArgumentError("--repo: required");
  if (options.out.empty()) return absl::InvalidArgumentError("--out: required");
  if (options.max_tasks < 1) return absl::InvalidArgumentError("--max-tasks: must be at least 1");
  if (options.sandboxes == nullptr) return absl::InvalidArgumentError("SynthOptions.sandboxes: required");
  RETURN_IF_ERROR(CheckDifficultyOptions(options.difficulty));
  if (!options.difficulty.agent.empty() && options.difficulty.attempts > 0 && options.difficulty.policy == nullptr) {
    return absl::InvalidArgumentError("SynthOptions.difficulty.policy: required with a difficulty agent");
  }
  Run run(options, progress);
  return run.Go();
}

}  // namespace flotilla::synth
