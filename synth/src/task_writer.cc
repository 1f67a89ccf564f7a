#include "task_writer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "deb_cache.h"
#include "flotilla/common/status.h"
#include "flotilla/common/text_files.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

absl::Status WriteFile(const fs::path& p, const std::string& content, fs::perms mode = fs::perms(0644)) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(p.string(), ": cannot write"));
  fs::permissions(p, mode, ec);
  return absl::OkStatus();
}

// Copies the tree without packaging and VCS folders, and without bytecode.
absl::Status CopyTree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(from, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat(from.string(), ": ", ec.message()));
    fs::path rel = fs::relative(it->path(), from);
    std::string name = rel.filename().string();
    if (it->is_directory() && (name == ".git" || name == "__pycache__" || name == ".pytest_cache" ||
                               (it.depth() == 0 && (name == "debian" || name == ".pc")))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink()) {
      fs::copy_symlink(it->path(), to / rel, ec);
      continue;
    }
    if (it->is_directory()) {
      fs::create_directories(to / rel, ec);
    } else if (it->is_regular_file() && rel.extension() != ".pyc" && rel.extension() != ".orig" &&
               rel.extension() != ".rej") {
      fs::create_directories((to / rel).parent_path(), ec);
      fs::copy_file(it->path(), to / rel, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError(absl::StrCat(it->path().string(), ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

std::string Toml(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
}

std::string TomlList(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  for (const auto& s : v) q.push_back(Toml(s));
  return absl::StrCat("[", absl::StrJoin(q, ", "), "]");
}

}  // namespace

std::string CleanBuildStateScript(const std::string& root) {
  // Makefiles that GNU make would read before Makefile (a restored one comes back), the objects,
  // libraries, dependency fragments (makefile text that the Makefiles include) and test logs:
  // everything the build takes from earlier runs is rebuilt from the sources.
  return "find " + ShellQuote(root) +
         " -name .git -prune -o \\( -name GNUmakefile -o -name makefile -o -name .deps -o -name .libs -o "
         "-name '*.o' -o -name '*.lo' -o -name '*.la' -o -name '*.a' -o -name '*.trs' -o -name test-suite.log "
         "\\) -prune -exec rm -rf {} + 2>/dev/null\n";
}

absl::Status CopyRepoTree(const std::string& from, const std::string& to) { return CopyTree(from, to); }

std::string RunnerFingerprintScript() {
  return "{ dpkg -V 2>&1 | sort; find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /app -o "
         "-path /tmp -o -path /logs -o -path /tests \\) -prune -o \\( -name '*.pth' -o -name sitecustomize.py -o "
         "-name usercustomize.py \\) -print 2>/dev/null | sort; find /usr/local /root/.local -type f "
         "2>/dev/null | sort; } | sha256sum | cut -d' ' -f1";
}

std::string MissingPassesScript(const ProjectProfile& p, const std::string& log, const std::string& expected) {
  std::string pass = p.language == "python" ? "PASSED|XFAIL" : "PASS|XFAIL";
  std::string fail = p.language == "python" ? "FAILED|ERROR|XPASS" : "FAIL|XPASS|ERROR";
  std::string sep = p.language == "python" ? " " : ": ";
  // A test reported as passing and as failing counts as failing.
  return absl::StrCat("comm -23 <(grep -v '^$' ", expected, " | sort -u) <(comm -23 <(grep -E '^(", pass, ")", sep,
                      "' ", log, " | sed -E 's/^(", pass, ")", sep, "//; s/ - .*$//' | sort -u) <(grep -E '^(", fail,
                      ")", sep, "' ", log, " | sed -E 's/^(", fail, ")", sep, "//; s/ - .*$//' | sort -u))");
}

std::string ProblemStatement(const TaskSpec& spec, const ProjectProfile& p) {
  std::ostringstream s;
  // A mined fix's failing tests are often new ones: they never passed before the fix. Its
  // Debian revision ("+deb12u3") would name the update that carries the fix: the upstream
  // version only.
  bool mined = spec.source == "commit-mining";
  std::string version = mined ? spec.version.substr(0, spec.version.rfind('-')) : spec.version;
  if (!spec.statement.empty()) {
    s << spec.statement << "\n\n## What to do\n\nThe repository in `/app` is " << spec.package
      << (version.empty() ? "" : " ") << version << ". Fix the library's code so that it behaves as "
      << "expected above and every test that passes now still passes. Do not change the tests or the test "
         "tooling: the tests are restored from a hidden copy before grading, and changed tooling fails the task.\n\n"
      << "Run the suite with:\n\n```\n"
      << (p.language == "python" ? "cd /app && python3 -m pytest -q" : "cd /app && make check") << "\n```\n";
    return s.str();
  }
  s << "# Failing tests in " << spec.package << "\n\n";
  s << "The repository in `/app` is " << spec.package << (version.empty() ? "" : " ") << version << " ("
    << (p.language == "python" ? "Python" : "C") << "). ";
  s << (mined ? "The code does not yet behave as its tests expect: " : "A recent change broke its behaviour: ")
    << spec.fail_to_pass.size() << (spec.fail_to_pass.size() == 1 ? " test fails" : " tests fail")
    << (mined ? ".\n\n" : " that used to pass.\n\n");
  s << "## Failing tests\n\n";
  size_t shown = 0;
  for (const std::string& t : spec.fail_to_pass) {
    if (++shown > 20) {
      s << "- ... and " << spec.fail_to_pass.size() - 20 << " more\n";
      break;
    }
    auto m = spec.messages.find(t);
    s << "- `" << t << "`";
    if (m != spec.messages.end() && !m->second.empty()) s << ": " << m->second;
    s << "\n";
  }
  s << "\n## What to do\n\n";
  s << "Find the defect in the library's code and fix it so that these tests pass" << (mined ? "" : " again")
    << " and every test that passes now still passes. Do not change the tests or the test tooling: the tests are "
       "restored from a hidden copy before grading, and changed tooling fails the task.\n\n";
  s << "Run the suite with:\n\n```\n"
    << (p.language == "python" ? "cd /app && python3 -m pytest -q" : "cd /app && make check") << "\n```\n";
  return s.str();
}

absl::Status WriteTask(const std::string& dir_s, const std::string& repo_dir, const ProjectProfile& p,
                       const TaskSpec& spec) {
  fs::path dir(dir_s);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir_s, ": ", ec.message()));
  RETURN_IF_ERROR(WriteFile(dir / "instruction.md", ProblemStatement(spec, p)));

  std::ostringstream toml;
  toml << "version = \"1.0\"\n\n[metadata]\ndifficulty = \"unknown\"\ncategory = \"debugging\"\n"
       << "tags = [\"synthesized\", " << Toml(p.language) << ", " << Toml(spec.kind) << "]\n\n"
       << "[agent]\ntimeout_sec = 1800.0\n\n[verifier]\ntimeout_sec = 900.0\n\n"
       << "[environment]\ncpus = 1\nmemory_mb = 2048\n\n"
       << "[synth]\npackage = " << Toml(spec.package) << "\nversion = " << Toml(spec.version)
       << "\nbase_hash = " << Toml(spec.base_hash) << "\nsource = " << Toml(spec.source)
       << "\nmutation_kind = " << Toml(spec.kind) << "\nfile = " << Toml(spec.file);
  if (!spec.origin_ref.empty()) {
    std::vector<std::string> files = {spec.file};
    for (const auto& o : spec.other_files) files.push_back(o.file);
    toml << "\nfiles = " << TomlList(files) << "\norigin_ref = " << Toml(spec.origin_ref)
         << "\norigin_subject = " << Toml(spec.origin_subject);
  }
  toml << "\nstatement = " << Toml(spec.statement.empty() ? "failing tests" : "model")
       << "\nlanguage = " << Toml(p.language) << "\nrunner = " << Toml(p.runner)
       << "\nfail_to_pass = " << TomlList(spec.fail_to_pass) << "\npass_to_pass = " << TomlList(spec.pass_to_pass)
       << "\ndifficulty_reason = \"no model configured: solve rate not measured\"\n\n[synth.timings]\n";
  for (const auto& [k, v] : spec.timings) toml << k << " = " << v << "\n";
  RETURN_IF_ERROR(WriteFile(dir / "task.toml", toml.str()));

  RETURN_IF_ERROR(CopyTree(repo_dir, dir / "environment" / "repo"));
  RETURN_IF_ERROR(WriteFile(dir / "environment" / "repo" / spec.file, spec.broken_content));
  for (const auto& o : spec.other_files) {
    RETURN_IF_ERROR(WriteFile(dir / "environment" / "repo" / o.file, o.broken_content));
  }
  RETURN_IF_ERROR(WriteFile(dir / "environment" / "Dockerfile", ProjectDockerfile(p, true)));
  RETURN_IF_ERROR(LinkDebs(spec.debs_dir, (dir / "environment" / "debs").string()));

  for (const std::string& t : p.test_files) {
    fs::path src = fs::path(spec.hidden_dir.empty() ? repo_dir : spec.hidden_dir) / t;
    if (!fs::is_regular_file(src, ec)) continue;
    fs::create_directories((dir / "tests" / "hidden" / t).parent_path(), ec);
    fs::copy_file(src, dir / "tests" / "hidden" / t, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat(src.string(), ": ", ec.message()));
  }
  RETURN_IF_ERROR(WriteFile(dir / "tests" / "hidden.sha256", spec.hidden_sha256));
  RETURN_IF_ERROR(WriteFile(dir / "tests" / "runner.sha256", spec.runner_sha256 + "\n"));
  RETURN_IF_ERROR(WriteFile(dir / "tests" / "fail_to_pass.txt", absl::StrJoin(spec.fail_to_pass, "\n") + "\n"));
  RETURN_IF_ERROR(WriteFile(dir / "tests" / "pass_to_pass.txt", absl::StrJoin(spec.pass_to_pass, "\n") + "\n"));
  if (p.language == "python") RETURN_IF_ERROR(WriteFile(dir / "tests" / "base_files.txt", spec.base_files));

  // The hidden files that must stay executable (configure, config.status, test scripts): the
  // files reach /tests without their modes.
  std::vector<std::string> executable;
  for (const std::string& f : p.test_files) {
    fs::path src = fs::path(spec.hidden_dir.empty() ? repo_dir : spec.hidden_dir) / f;
    if (fs::is_regular_file(src, ec) &&
        (fs::status(src, ec).permissions() & fs::perms::owner_exec) != fs::perms::none) {
      executable.push_back(ShellQuote(f));
    }
  }
  std::ostringstream t;
  t << "#!/bin/bash\n"
       "# Verifier of a synthesized task: restores the hidden tests, checks their hashes and the test\n"
       "# runner's, runs the suite; reward 1 when every fail-to-pass and pass-to-pass test passes.\n"
       "mkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"
       "fail() { echo \"FAIL: $*\"; exit 0; }\n"
       "export PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8\n"
       "cd /app || fail \"no /app\"\n"
    << "[ \"$(" << RunnerFingerprintScript()
    << ")\" = \"$(cat /tests/runner.sha256)\" ] || fail \"the test runner, its packages or Python's startup hooks "
       "were changed\"\n";
  if (p.language == "c") t << CleanBuildStateScript("/app");
  t << "while read -r sum path; do rm -rf \"/app/$path\"; done < /tests/hidden.sha256\n"
       "cp -r /tests/hidden/. /app/ || fail \"restoring the hidden tests\"\n";
  if (!executable.empty()) t << "chmod +x -- " << absl::StrJoin(executable, " ") << "\n";
  if (p.language == "c") {
    // One time stamp for every restored file: make sees the restored build system as up to date
    // among itself (no autotools rerun), and the restored tests as newer than any object.
    t << "now=$(date +%s); while read -r sum path; do touch -h -d \"@$now\" \"/app/$path\"; done < "
         "/tests/hidden.sha256\n";
  }
  t << "sha256sum --quiet -c /tests/hidden.sha256 || fail \"hidden tests differ after restoring\"\n";
  if (p.language == "python") {
    // Python files the base did not have (a conftest.py, a module shadowing pytest) go.
    t << "find /app -name .git -prune -o \\( -name '*.py' -o -name '*.pth' \\) -print | sed 's|^/app/||' | sort > "
         "/tmp/now.txt\n"
         "comm -23 /tmp/now.txt <(sort /tests/base_files.txt) | while read -r f; do rm -f \"/app/$f\"; done\n"
         "find /app -name __pycache__ -prune -exec rm -rf {} +\n";
  } else if (p.runner == "automake") {
    t << "(cd /app && sh ./config.status --quiet && make -j2) > /tmp/verifier-build.log 2>&1 || fail \"build failed: "
         "$(tail -5 /tmp/verifier-build.log)\"\n";
  } else if (!p.build_script.empty()) {
    t << "(" << p.build_script << ") > /tmp/verifier-build.log 2>&1 || fail \"build failed: $(tail -5 "
                                  "/tmp/verifier-build.log)\"\n";
  }
  t << "(" << p.test_script << ") > /tmp/verifier-tests.log 2>&1\n"
    << "missing=$(" << MissingPassesScript(p, "/tmp/verifier-tests.log", "/tests/fail_to_pass.txt") << ")\n"
    << "[ -z \"$missing\" ] || fail \"fail-to-pass tests still failing: $(echo $missing | head -c 2000)\"\n"
    << "missing=$(" << MissingPassesScript(p, "/tmp/verifier-tests.log", "/tests/pass_to_pass.txt") << ")\n"
    << "[ -z \"$missing\" ] || fail \"pass-to-pass tests now failing: $(echo $missing | head -c 2000)\"\n"
    << "echo PASS\necho 1 > /logs/verifier/reward.txt\n";
  RETURN_IF_ERROR(WriteFile(dir / "tests" / "test.sh", t.str(), fs::perms(0755)));

  std::vector<TaskSpec::OtherFile> fixed = {{spec.file, spec.fixed_content, spec.broken_content}};
  fixed.insert(fixed.end(), spec.other_files.begin(), spec.other_files.end());
  std::ostringstream sol;
  sol << "#!/bin/bash\n# The fix: " << spec.file << (fixed.size() > 1 ? " and the other changed files" : "")
      << " as it was before the bug.\nset -e\n";
  for (const auto& f : fixed) {
    std::string delim = "FLOTILLA_SYNTH_FIX";
    while (f.fixed_content.find(delim) != std::string::npos) delim += "_";
    sol << "cat > /app/" << f.file << " <<'" << delim << "'\n"
        << f.fixed_content << (f.fixed_content.empty() || f.fixed_content.back() == '\n' ? "" : "\n") << delim
        << "\n";
    if (!f.fixed_content.empty() && f.fixed_content.back() != '\n') sol << "truncate -s -1 /app/" << f.file << "\n";
  }
  RETURN_IF_ERROR(WriteFile(dir / "solution" / "solve.sh", sol.str(), fs::perms(0755)));
  return absl::OkStatus();
}

}  // namespace flotilla::synth
