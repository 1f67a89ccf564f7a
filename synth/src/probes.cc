#include "probes.h"

#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"
#include "flotilla/common/text_files.h"
#include "test_sandbox.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

// Runs `agent` (a bash script, may be empty) in a fresh sandbox of the task's environment,
// then copies tests/ to /tests and runs the verifier, as the worker does; returns the reward.
absl::StatusOr<std::pair<double, std::string>> Score(worker::SandboxClient& sandboxes, const std::string& top,
                                                     const std::string& task_dir, const std::string& agent,
                                                     uint32_t timeout_ms) {
  ASSIGN_OR_RETURN(std::unique_ptr<TestSandbox> sb, TestSandbox::Start(sandboxes, top));
  if (!agent.empty()) {
    ASSIGN_OR_RETURN(ShellRun a, sb->Run(agent, timeout_ms));
    (void)a;
  }
  std::error_code ec;
  fs::path tests = fs::path(task_dir) / "tests";
  for (auto it = fs::recursive_directory_iterator(tests, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    RETURN_IF_ERROR(sb->Put("/tests/" + fs::relative(it->path(), tests).string(), ReadFileOrEmpty(it->path()), 0644));
  }
  ASSIGN_OR_RETURN(ShellRun v, sb->Run("bash /tests/test.sh", timeout_ms));
  auto reward = sb->Get("/logs/verifier/reward.txt");
  double r = 0;
  if (!reward.ok() || !absl::SimpleAtod(absl::StripAsciiWhitespace(*reward), &r)) r = 0;
  std::string tail = v.output.size() > 400 ? v.output.substr(v.output.size() - 400) : v.output;
  return std::make_pair(r, tail);
}

std::string FakeRunnerLines(const ProjectProfile& p, const TaskSpec& spec) {
  std::string lines;
  for (const auto* list : {&spec.fail_to_pass, &spec.pass_to_pass}) {
    for (const std::string& t : *list) lines += (p.language == "python" ? "PASSED " : "PASS: ") + t + "\n";
  }
  return lines;
}

}  // namespace

absl::StatusOr<std::vector<ProbeResult>> ProbeTask(worker::SandboxClient& sandboxes, const std::string& top,
                                                   const std::string& task_dir, const ProjectProfile& p,
                                                   const TaskSpec& spec,
                                                   const std::vector<std::string>& unique_fix_lines,
                                                   uint32_t timeout_ms) {
  std::vector<std::string> tests;
  for (const std::string& t : p.test_files) tests.push_back(ShellQuote(t));
  std::string rm_tests = absl::StrCat("cd /app && rm -rf ", absl::StrJoin(tests, " "));
  std::string edit_tests;
  for (const std::string& t : p.test_files) {
    std::string trivial = p.language == "python" ? (absl::EndsWith(t, ".py") ? "def test_ok():\n    pass\n" : "")
                                                 : (absl::EndsWith(t, ".c") ? "int main(void) { return 0; }\n" : "");
    if (trivial.empty()) continue;
    absl::StrAppend(&edit_tests, "printf '%s' ", ShellQuote(trivial), " > /app/", ShellQuote(t), "\n");
  }
  std::string fake = FakeRunnerLines(p, spec);
  std::string replace_runner =
      p.language == "python"
          ? absl::StrCat("d=$(python3 -c 'import os, pytest; print(os.path.dirname(pytest.__file__))') && "
                         "printf '%s' ",
                         ShellQuote(absl::StrCat("import sys\nsys.stdout.write(", "open('/usr/share/fake-pass').read())\n")),
                         " > \"$d/__main__.py\" && printf '%s' ", ShellQuote(fake), " > /usr/share/fake-pass")
          : absl::StrCat("printf '%s' ", ShellQuote(fake), " > /usr/share/fake-pass && printf '%s' ",
                         ShellQuote("#!/bin/sh\ncat /usr/share/fake-pass\nexit 0\n"), " > /usr/bin/make");
  // GNU make reads GNUmakefile before Makefile: a fake one at the top answers every target
  // with the expected PASS lines unless the verifier removes it.
  std::string shadow_makefile = absl::StrCat("printf '%s' ", ShellQuote(fake), " > /usr/share/fake-pass && printf '%s' ",
                                             ShellQuote("check all:\n\t@cat /usr/share/fake-pass\n%:\n\t@true\n"),
                                             " > /app/GNUmakefile");
  struct Agent {
    std::string name;
    std::string script;
    double want;
  };
  std::vector<Agent> agents = {{"oracle", ReadFileOrEmpty(fs::path(task_dir) / "solution" / "solve.sh"), 1.0},
                               {"nop", "", 0.0},
                               {"delete-tests", rm_tests, 0.0},
                               {"edit-tests", edit_tests, 0.0},
                               {"replace-runner", replace_runner, 0.0}};
  if (p.language == "c") agents.push_back({"shadow-makefile", shadow_makefile, 0.0});
  std::vector<ProbeResult> out;
  for (const Agent& a : agents) {
    ASSIGN_OR_RETURN(auto scored, Score(sandboxes, top, task_dir, a.script, timeout_ms));
    ProbeResult r{a.name, scored.first, scored.first == a.want, scored.second};
    out.push_back(r);
    if (!r.ok) return out;
  }
  // Leaks: the environment as the agent finds it.
  ASSIGN_OR_RETURN(std::unique_ptr<TestSandbox> sb, TestSandbox::Start(sandboxes, top));
  RETURN_IF_ERROR(sb->Put("/run/fix-lines.txt", absl::StrJoin(unique_fix_lines, "\n") + "\n", 0600));
  std::string script = R"SH(cd /app || exit 1
n=$(git rev-list --all 2>/dev/null | wc -l); [ "$n" = 1 ] || echo "LEAK: $n commits in the repository"
[ -z "$(git stash list 2>/dev/null)" ] || echo "LEAK: a stash"
[ -z "$(git tag 2>/dev/null)" ] || echo "LEAK: tags"
r=$(git for-each-ref 2>/dev/null | wc -l); [ "$r" -le 1 ] || echo "LEAK: $r refs"
[ ! -e .git/logs ] || echo "LEAK: a reflog"
[ ! -e .git/ORIG_HEAD ] || echo "LEAK: ORIG_HEAD"
f=$(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /usr/share -o -path /usr/lib \) -prune -o \( -name '*.orig' -o -name '*.rej' -o -name '*.pyc' -o -name __pycache__ -o -name '*.patch' -o -name '*.diff' \) -print 2>/dev/null | head -3)
[ -z "$f" ] || echo "LEAK: $f"
if [ -s /run/fix-lines.txt ] && grep -q . /run/fix-lines.txt; then
  # Whole lines, leading and trailing blanks aside (the fix lines are stored stripped).
  strip() { sed 's/^[[:space:]]*//; s/[[:space:]]*$//'; }
  g=$(git cat-file --batch-all-objects --batch 2>/dev/null | strip | grep -axF -f /run/fix-lines.txt | head -2)
  [ -z "$g" ] || echo "LEAK: a git object holds: $g"
  g=$(grep -rIlF -f /run/fix-lines.txt /app /root /tmp /var/tmp /home /opt /srv /usr/local --exclude-dir=.git 2>/dev/null |
      while read -r f; do strip < "$f" | grep -qxF -f /run/fix-lines.txt && echo "$f"; done | head -2)
  [ -z "$g" ] || echo "LEAK: files hold a line of the fix: $g"
fi
true)SH";
  ASSIGN_OR_RETURN(ShellRun leak, sb->Run(script, timeout_ms));
  ProbeResult r{"leak", 0, false, ""};
  size_t at = leak.output.find("LEAK:");
  r.ok = leak.exit_code == 0 && at == std::string::npos;
  r.reward = r.ok ? 0 : 1;
  r.detail = at == std::string::npos ? (leak.exit_code == 0 ? "" : leak.output.substr(0, 300))
                                     : leak.output.substr(at, 300);
  out.push_back(r);
  return out;
}

}  // namespace flotilla::synth
