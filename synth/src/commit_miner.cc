#include "commit_miner.h"

#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/text_files.h"
#include "unified_diff.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxDiffBytes = 1 << 20;

// `git -C repo ARGS` with settings that keep its output in the plain form parsed here (no
// pager, colour, external diff, textconv or prefix changes from the user's configuration).
absl::StatusOr<std::string> Git(const std::string& repo, const std::string& args) {
  std::string cmd = absl::StrCat("git -c core.quotepath=off -c diff.noprefix=false -c color.ui=never ",
                                 "-c log.showSignature=false -c 'safe.directory=*' -C ", ShellQuote(repo), " ", args, " 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("git: popen failed");
  std::string out;
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("git ", args, " in ", repo, ": ", out.substr(0, 500)));
  }
  return out;
}

bool HasDirPart(const fs::path& rel, std::initializer_list<const char*> names) {
  for (const auto& part : rel.parent_path()) {
    for (const char* n : names) {
      if (part == n) return true;
    }
  }
  return false;
}

// synth.db keeps a mined fix's contents as JSON text, which must be UTF-8.
bool IsUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

// A fix (its file sections) checked and reverted on the tree; the reason when it is none.
struct Verdict {
  std::optional<MinedFix> fix;
  std::string reason;
};

Verdict Judge(MinedFix fix, const std::vector<FileDiff>& files, const std::string& repo, const ProjectProfile& p,
              const MiningOptions& o, bool need_tests) {
  std::vector<const FileDiff*> sources;
  std::vector<std::string> others;
  for (const FileDiff& d : files) {
    bool test = IsTestPath(p.language, d.path()), source = !test && IsSourcePath(p.language, d.path());
    if (d.binary && (test || source)) return {std::nullopt, "binary change to " + d.path()};
    if (source) {
      sources.push_back(&d);
    } else if (test) {
      fix.test_files.push_back(d.path());
    } else {
      others.push_back(d.path());
    }
  }
  if (sources.empty()) {
    return {std::nullopt, absl::StrCat("no source change (", files.size(), " files: ",
                                       absl::StrJoin(fix.test_files.empty() ? others : fix.test_files, " ").substr(0, 200),
                                       ")")};
  }
  if (need_tests && fix.test_files.empty()) return {std::nullopt, "no test change"};
  int changed = 0;
  for (const FileDiff* d : sources) changed += d->added + d->removed;
  if (changed > o.max_changed_lines || static_cast<int>(sources.size()) > o.max_source_files) {
    return {std::nullopt, absl::StrCat("too large: ", changed, " changed lines in ", sources.size(),
                                       " source files (at most ", o.max_changed_lines, " in ", o.max_source_files, ")")};
  }
  for (const FileDiff* d : sources) {
    // The verifier keeps only the files the base had; a fix that adds or removes a file has no
    // broken state it can grade.
    if (d->old_path == "/dev/null") return {std::nullopt, "adds a source file: " + d->path()};
    if (d->new_path == "/dev/null") return {std::nullopt, "removes a source file: " + d->path()};
    if (d->old_path != d->new_path) return {std::nullopt, "renames a source file: " + d->old_path};
    if (d->hunks.empty()) return {std::nullopt, "changes only the mode of " + d->path()};
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(repo) / d->path(), ec)) {
      return {std::nullopt, "does not revert: " + d->path() + " is not in the current tree"};
    }
    std::string current = ReadFileOrEmpty(fs::path(repo) / d->path());
    if (!IsUtf8(current)) return {std::nullopt, "not UTF-8 text: " + d->path()};
    auto before = ApplyFileDiff(current, *d, /*reverse=*/true);
    if (!before.ok()) {
      return {std::nullopt, absl::StrCat("does not revert on the current tree: ", before.status().message())};
    }
    if (*before == current) return {std::nullopt, "reverting changes nothing in " + d->path()};
    if (!IsUtf8(*before)) return {std::nullopt, "not UTF-8 text once reverted: " + d->path()};
    fix.broken[d->path()] = *before;
    fix.source_files.push_back(d->path());
    if (fix.first_line == 0) fix.first_line = std::max(1, d->hunks.front().new_start);
  }
  std::sort(fix.source_files.begin(), fix.source_files.end());
  fix.changed_lines = changed;
  return {std::move(fix), ""};
}

}  // namespace

bool IsTestPath(const std::string& language, const std::string& path) {
  fs::path rel(path);
  std::string name = rel.filename().string();
  if (language == "python") {
    return name == "conftest.py" || (absl::StartsWith(name, "test_") && absl::EndsWith(name, ".py")) ||
           absl::EndsWith(name, "_test.py") || HasDirPart(rel, {"tests", "test", "testing"});
  }
  return absl::StartsWith(name, "test") || absl::EndsWith(name, "_test.c") || absl::EndsWith(name, "-test.c") ||
         HasDirPart(rel, {"tests", "test", "t", "testsuite"});
}

bool IsSourcePath(const std::string& language, const std::string& path) {
  if (IsTestPath(language, path)) return false;
  // Documentation, examples and benchmarks are not the library (project_profile.cc skips them too).
  fs::path rel(path);
  if (rel.has_parent_path()) {
    std::string top = rel.begin()->string();
    for (const char* d : {"doc", "docs", "examples", "bench", "benchmarks", "contrib"}) {
      if (top == d) return false;
    }
  }
  std::string name = fs::path(path).filename().string();
  if (language == "python") return absl::EndsWith(name, ".py") && name != "setup.py";
  return absl::EndsWith(name, ".c") || absl::EndsWith(name, ".h");
}

absl::StatusOr<MiningResult> MineCommits(const std::string& repo, const ProjectProfile& p, const MiningOptions& o) {
  MiningResult r;
  if (o.max_commits <= 0) return r;
  // One line per commit, newest first: "<hash> <parents...>\t<subject>".
  auto log = Git(repo, absl::StrCat("log --no-color -n ", o.max_commits, " --format='%H %P%x09%s' HEAD --"));
  if (!log.ok()) return log.status();
  for (absl::string_view line : absl::StrSplit(*log, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> ids_subject = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    std::vector<std::string> ids = absl::StrSplit(ids_subject.first, ' ', absl::SkipEmpty());
    if (ids.empty()) continue;
    ++r.looked_at;
    MiningSkip skip{"commit", ids[0], std::string(ids_subject.second), ""};
    if (ids.size() > 2) {
      skip.reason = absl::StrCat("merge commit (", ids.size() - 1, " parents)");
    } else if (ids.size() == 1) {
      skip.reason = "root commit (no parent to compare with)";
    } else {
      auto diff = Git(repo, absl::StrCat("diff-tree -p --no-color --no-ext-diff --no-textconv --no-renames ",
                                         "--src-prefix=a/ --dst-prefix=b/ -U3 ", ids[0]));
      if (!diff.ok()) return diff.status();
      if (diff->size() > kMaxDiffBytes) {
        skip.reason = absl::StrCat("too large: a ", diff->size(), "-byte diff");
      } else {
        MinedFix fix;
        fix.kind = "commit";
        fix.ref = ids[0];
        fix.subject = skip.subject;
        Verdict v = Judge(std::move(fix), ParseUnifiedDiff(*diff, 1), repo, p, o, /*need_tests=*/true);
        if (v.fix) {
          r.fixes.push_back(std::move(*v.fix));
          continue;
        }
        skip.reason = v.reason;
      }
    }
    r.skips.push_back(std::move(skip));
  }
  return r;
}

absl::StatusOr<MiningResult> MineDebianPatches(const std::string& repo, const ProjectProfile& p,
                                               const MiningOptions& o) {
  MiningResult r;
  fs::path dir = fs::path(repo) / "debian" / "patches";
  std::error_code ec;
  if (!fs::is_regular_file(dir / "series", ec)) return r;
  std::ifstream series(dir / "series");
  if (!series) return absl::InvalidArgumentError((dir / "series").string() + ": cannot read");
  // dpkg-source records what it applied; without the record a patch's state is tested.
  std::set<std::string> applied;
  bool have_record = fs::is_regular_file(fs::path(repo) / ".pc" / "applied-patches", ec);
  if (have_record) {
    for (absl::string_view l : absl::StrSplit(ReadFileOrEmpty(fs::path(repo) / ".pc" / "applied-patches"), '\n', absl::SkipEmpty())) {
      applied.insert(std::string(absl::StripAsciiWhitespace(l)));
    }
  }
  std::string line;
  while (std::getline(series, line)) {
    absl::string_view l = line;
    l = l.substr(0, l.find('#'));
    std::vector<std::string> words = absl::StrSplit(l, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    ++r.looked_at;
    const std::string& name = words[0];
    int strip = 1;
    for (size_t i = 1; i < words.size(); ++i) {
      if (absl::StartsWith(words[i], "-p") && words[i].size() == 3 && absl::ascii_isdigit(words[i][2])) {
        strip = words[i][2] - '0';
      }
    }
    MiningSkip skip{"debian-patch", name, "", ""};
    std::string text = ReadFileOrEmpty(dir / name);
    // The subject: DEP-3's Description or Subject (a mailed patch), else the first line.
    for (absl::string_view h : absl::StrSplit(text.substr(0, text.find("\n--- ")), '\n')) {
      for (const char* field : {"Description:", "Subject:"}) {
        if (skip.subject.empty() && absl::StartsWith(h, field)) {
          skip.subject = std::string(absl::StripAsciiWhitespace(h.substr(absl::string_view(field).size())));
          if (absl::StartsWith(skip.subject, "[PATCH] ")) skip.subject.erase(0, 8);
        }
      }
    }
    if (skip.subject.empty()) {
      for (absl::string_view h : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
        if (!absl::StartsWith(h, "---") && !absl::StartsWith(h, "Index:") && !absl::StartsWith(h, "diff ")) {
          skip.subject = std::string(absl::StripAsciiWhitespace(h));
        }
        break;
      }
    }
    std::vector<FileDiff> files = ParseUnifiedDiff(text, strip);
    if (!fs::is_regular_file(dir / name, ec)) {
      skip.reason = "listed in the series but not in debian/patches";
    } else if (files.empty()) {
      skip.reason = "no file changes in the patch";
    } else if (have_record && applied.count(name) == 0) {
      skip.reason = "not applied in the tree (not in .pc/applied-patches)";
    } else {
      MinedFix fix;
      fix.kind = "debian-patch";
      fix.ref = name;
      fix.subject = skip.subject;
      Verdict v = Judge(std::move(fix), files, repo, p, o, /*need_tests=*/false);
      if (v.fix) {
        r.fixes.push_back(std::move(*v.fix));
        continue;
      }
      skip.reason = v.reason;
      if (!have_record && absl::StartsWith(v.reason, "does not revert")) {
        skip.reason += " (no .pc/applied-patches: the patch may not be applied)";
      }
    }
    r.skips.push_back(std::move(skip));
  }
  return r;
}

}  // namespace flotilla::synth
