// Unit tests of the synthesizer's pure parts: test-report parsing, the C tokenizer and its
// mutations, the project detection, and the SQLite state (resumability).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "flotilla/synth/c_mutator.h"
#include "flotilla/synth/synth_state.h"
#include "flotilla/synth/test_results.h"
#include "gtest/gtest.h"
#include "project_profile.h"
#include "task_writer.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

TEST(TestResultsTest, ParsesPytestShortSummary) {
  TestReport r = ParsePytestReport(
      "....F\n"
      "=========================== short test summary info ============================\n"
      "PASSED toolz/tests/test_a.py::test_one\n"
      "PASSED toolz/tests/test_a.py::test_param[1-2]\n"
      "XFAIL toolz/tests/test_a.py::test_known - reason\n"
      "FAILED toolz/tests/test_a.py::test_two - assert 3 == 4\n"
      "ERROR toolz/tests/test_b.py::test_fixture - RuntimeError: boom\n"
      "ERROR collecting toolz/tests/test_c.py\n"
      "SKIPPED [1] toolz/tests/test_a.py:10: no numpy\n"
      "1 failed, 3 passed in 0.10s\n");
  EXPECT_EQ(r.outcomes.size(), 5u);
  EXPECT_EQ(r.Count(TestOutcome::kPass), 3);
  EXPECT_EQ(r.Count(TestOutcome::kFail), 2);
  EXPECT_EQ(r.outcomes.at("toolz/tests/test_a.py::test_param[1-2]"), TestOutcome::kPass);
  EXPECT_EQ(r.messages.at("toolz/tests/test_a.py::test_two"), "assert 3 == 4");
  EXPECT_EQ(r.messages.at("toolz/tests/test_b.py::test_fixture"), "RuntimeError: boom");
}

TEST(TestResultsTest, FailureWinsOverPassForTheSameTest) {
  TestReport r = ParsePytestReport("FAILED t.py::x - no\nPASSED t.py::x\n");
  EXPECT_EQ(r.outcomes.at("t.py::x"), TestOutcome::kFail);
  TestReport a = ParseAutomakeReport("PASS: test-reader\nFAIL: test-reader\n");
  EXPECT_EQ(a.outcomes.at("test-reader"), TestOutcome::kFail);
}

TEST(TestResultsTest, ParsesAutomakeHarnessLines) {
  TestReport r = ParseAutomakeReport(
      "PASS: test-version\nFAIL: test-reader\nSKIP: test-slow\nXFAIL: test-known\n"
      "============================================================================\n"
      "# TOTAL: 4\n# PASS:  1\n# FAIL:  1\n");
  EXPECT_EQ(r.outcomes.size(), 4u);
  EXPECT_EQ(r.outcomes.at("test-version"), TestOutcome::kPass);
  EXPECT_EQ(r.outcomes.at("test-reader"), TestOutcome::kFail);
  EXPECT_EQ(r.outcomes.at("test-slow"), TestOutcome::kSkip);
  EXPECT_EQ(r.outcomes.at("test-known"), TestOutcome::kPass);
}

TEST(CTokenizerTest, SkipsCommentsStringsAndPreprocessorLines) {
  std::string src =
      "#include <stdio.h>\n#define LT(a, b) \\\n  ((a) < (b))\n"
      "/* a < b */ int f(int a) { // a == 1\n  return a <= 2 ? \"x<y\" : 'c';\n}\n";
  std::vector<CToken> t = TokenizeC(src);
  std::vector<std::string> texts;
  for (const CToken& k : t) texts.emplace_back(k.text);
  std::vector<std::string> want = {"int", "f", "(", "int", "a", ")", "{", "return", "a",
                                   "<=", "2", "?", "\"x<y\"", ":", "'c'", ";", "}"};
  EXPECT_EQ(texts, want);
  EXPECT_EQ(t[7].line, 5);
  EXPECT_EQ(t[12].kind, CToken::Kind::kString);
}

TEST(CMutatorTest, MakesEachKindInsideFunctionBodiesOnly) {
  std::string src =
      "static int limit = 10;\n"
      "int clamp(int x, int y) {\n"
      "  if (x > y && y != 0) return y;\n"
      "  return max(x, y + 1);\n"
      "}\n";
  std::vector<SourceEdit> e = MutateC("c.c", src);
  std::map<std::string, std::vector<std::string>> by_kind;
  for (const SourceEdit& x : e) by_kind[x.kind].push_back(ApplyEdit(src, x).substr(47));
  ASSERT_EQ(by_kind["flip_compare"].size(), 2u);
  EXPECT_EQ(by_kind["flip_compare"][0], "{\n  if (x <= y && y != 0) return y;\n  return max(x, y + 1);\n}\n");
  EXPECT_EQ(by_kind["flip_compare"][1], "{\n  if (x > y && y == 0) return y;\n  return max(x, y + 1);\n}\n");
  EXPECT_EQ(by_kind["flip_boolean"].size(), 1u);
  EXPECT_EQ(by_kind["drop_branch"].size(), 1u);
  EXPECT_EQ(by_kind["drop_return"].size(), 2u);
  EXPECT_EQ(by_kind["swap_args"].size(), 1u);
  EXPECT_EQ(by_kind["off_by_one"].size(), 2u);  // 0 and 1 in the body; "10" is outside any function
  EXPECT_EQ(by_kind["change_constant"].size(), 2u);
  for (const SourceEdit& x : e) {
    if (x.kind == "swap_args") {
      EXPECT_NE(ApplyEdit(src, x).find("\n  return max(y + 1, x);\n}\n"), std::string::npos);
      EXPECT_EQ(x.description, "arguments 'x' and 'y + 1' of max() swapped");
    }
    if (x.kind == "drop_branch") {
      EXPECT_NE(ApplyEdit(src, x).find("{\n  if (0) return y;\n"), std::string::npos);
    }
  }
}

TEST(CMutatorTest, LeavesDeclarationsAndArraySizesAlone) {
  std::string src = "int f(int a, int b);\nvoid g(void) { char buf[16]; h(buf, 3); }\n";
  std::vector<SourceEdit> e = MutateC("d.c", src);
  std::vector<std::string> kinds;
  for (const SourceEdit& x : e) kinds.push_back(x.kind + "@" + std::to_string(x.start));
  std::vector<std::string> want = {"swap_args@52", "off_by_one@57", "change_constant@57"};
  EXPECT_EQ(kinds, want);
}

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(ProjectProfileTest, DetectsPythonWithPytest) {
  testing::TempDir d;
  Write(d.file("pkg/__init__.py"), "");
  Write(d.file("pkg/core.py"), "def f(): return 1\n");
  Write(d.file("pkg/tests/test_core.py"), "def test_f(): pass\n");
  Write(d.file("setup.cfg"), "[metadata]\n");
  Write(d.file("debian/tests/control"), "");
  auto p = DetectProject(d.path());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->language, "python");
  EXPECT_EQ(p->runner, "pytest");
  EXPECT_EQ(p->source_files, (std::vector<std::string>{"pkg/__init__.py", "pkg/core.py"}));
  EXPECT_EQ(p->test_files, (std::vector<std::string>{"pkg/tests/test_core.py", "setup.cfg"}));
}

TEST(ProjectProfileTest, DetectsAutomakeC) {
  testing::TempDir d;
  Write(d.file("configure.ac"), "AC_INIT\n");
  Write(d.file("Makefile.am"), "SUBDIRS = src tests\n");
  Write(d.file("src/a.c"), "int a(void) { return 1; }\n");
  Write(d.file("tests/Makefile.am"), "TESTS = t1\n");
  Write(d.file("tests/t1.c"), "int main(void) { return 0; }\n");
  Write(d.file("src/a.h"), "int a(void);\n");
  Write(d.file("src/a.map"), "LIBA_1 { a; };\n");
  Write(d.file("build-aux/test-driver"), "#!/bin/sh\n");
  Write(d.file("doc/Makefile.am"), "EXTRA_DIST = a.3\n");
  Write(d.file("doc/example.c"), "int main(void) { return 0; }\n");
  Write(d.file("debian/control"), "Source: a\n");
  auto p = DetectProject(d.path());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->language, "c");
  EXPECT_EQ(p->runner, "automake");
  EXPECT_EQ(p->build_script,
            "cd /app && (test -x configure || autoreconf -fi) && ./configure -q --disable-shared && make -j2");
  EXPECT_EQ(p->source_files, (std::vector<std::string>{"src/a.c"}));
  // Every file but the library's .c/.h is the harness (doc/'s Makefile.am too), and
  // config.status from the built environment.
  EXPECT_EQ(p->test_files, (std::vector<std::string>{"Makefile.am", "build-aux/test-driver", "configure.ac",
                                                      "doc/Makefile.am", "src/a.map", "tests/Makefile.am",
                                                      "tests/t1.c", "config.status"}));
}

TEST(TaskWriterTest, CleanBuildStateRemovesWhatABuildReusesOutsideGit) {
  testing::TempDir d;
  for (const char* f : {"GNUmakefile", "src/makefile", "src/.deps/a.Plo", "src/.libs/liba.so", "src/a.o", "src/a.lo",
                        "src/liba.la", "src/liba.a", "tests/t1.trs", "tests/test-suite.log", ".git/objects/a.o",
                        "src/a.c", "src/a.h", "Makefile", "tests/t1.log", "config.status"}) {
    Write(d.file(f), "x\n");
  }
  std::string script = d.file("clean.sh");
  Write(script, CleanBuildStateScript(d.path().string()));
  ASSERT_EQ(std::system(("bash " + script).c_str()), 0);
  std::vector<std::string> left;
  namespace fs = std::filesystem;
  for (auto it = fs::recursive_directory_iterator(d.path()); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_regular_file()) left.push_back(fs::relative(it->path(), d.path()).string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".git/objects/a.o", "Makefile", "clean.sh", "config.status", "src/a.c",
                                            "src/a.h", "tests/t1.log"}));
}

TEST(TaskWriterTest, CVerifierRestoresModesAndRebuildsThroughConfigStatus) {
  testing::TempDir d;
  Write(d.file("repo/configure.ac"), "AC_INIT\n");
  Write(d.file("repo/src/a.c"), "int a(void) { return 1; }\n");
  Write(d.file("hidden/configure.ac"), "AC_INIT\n");
  Write(d.file("hidden/config.status"), "#!/bin/sh\n");
  std::filesystem::permissions(d.file("hidden/config.status"), std::filesystem::perms(0755));
  ProjectProfile p;
  p.language = "c";
  p.runner = "automake";
  p.test_script = "make check";
  p.test_files = {"configure.ac", "config.status"};
  TaskSpec s;
  s.package = "a";
  s.file = "src/a.c";
  s.fixed_content = "int a(void) { return 1; }\n";
  s.broken_content = "int a(void) { return 0; }\n";
  s.fail_to_pass = {"t1"};
  s.hidden_dir = d.file("hidden");
  ASSERT_TRUE(WriteTask(d.file("task"), d.file("repo"), p, s).ok());
  std::ifstream in(d.file("task/tests/test.sh"));
  std::string sh((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> lines;
  for (size_t a = 0, b; a < sh.size(); a = b + 1) {
    b = sh.find('\n', a);
    if (b == std::string::npos) b = sh.size();
    lines.push_back(sh.substr(a, b - a));
  }
  auto has = [&](const std::string& l) { return std::find(lines.begin(), lines.end(), l) != lines.end(); };
  EXPECT_TRUE(has(CleanBuildStateScript("/app").substr(0, CleanBuildStateScript("/app").size() - 1))) << sh;
  EXPECT_TRUE(has("chmod +x -- 'config.status'")) << sh;
  EXPECT_TRUE(has("(cd /app && sh ./config.status --quiet && make -j2) > /tmp/verifier-build.log 2>&1 || fail "
                  "\"build failed: $(tail -5 /tmp/verifier-build.log)\""))
      << sh;
  // The clean step comes before the restore (a restored GNUmakefile stays).
  EXPECT_LT(sh.find("-name GNUmakefile"), sh.find("cp -r /tests/hidden/. /app/")) << sh;
  EXPECT_EQ(sh.find("./configure"), std::string::npos) << sh;
}

TEST(ProjectProfileTest, SrcLayoutRunsWithSrcOnThePathAndGetsDebianTestDependencies) {
  testing::TempDir d;
  Write(d.file("src/pkg/__init__.py"), "");
  Write(d.file("tests/test_pkg.py"), "def test_f(): pass\n");
  Write(d.file("debian/control"),
        "Source: pkg\nBuild-Depends:\n debhelper-compat (= 13),\n dh-python,\n python3-all,\n"
        " python3-markupsafe (>= 2.0),\n python3-sphinx,\n python3-pytest <!nocheck>,\n"
        "Build-Depends-Indep: python3-babel | python3-other, libfoo-dev\n\n"
        "Package: python3-pkg\nDepends: python3-notabuilddep\n");
  EXPECT_EQ(DebianBuildDepends(d.path()),
            (std::vector<std::string>{"debhelper-compat", "dh-python", "python3-all", "python3-markupsafe",
                                      "python3-sphinx", "python3-pytest", "python3-babel", "libfoo-dev"}));
  auto p = DetectProject(d.path());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->packages, (std::vector<std::string>{"python3", "python3-pytest", "git", "python3-markupsafe",
                                                   "python3-babel"}));
  EXPECT_NE(p->test_script.find("PYTHONPATH=/app/src python3 -B -s -m pytest"), std::string::npos) << p->test_script;
  EXPECT_EQ(DebianBuildDepends(d.file("missing")), std::vector<std::string>{});
}

TEST(ProjectProfileTest, RefusesATreeWithoutTests) {
  testing::TempDir d;
  Write(d.file("pkg/core.py"), "def f(): return 1\n");
  auto p = DetectProject(d.path());
  ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("no test suite found (1 Python files but no test files)"), std::string::npos)
      << p.status();
  EXPECT_EQ(DetectProject(d.file("missing")).status().code(), absl::StatusCode::kNotFound);
}

TEST(TaskWriterTest, StatementNamesFailingTestsNeverTheChange) {
  TaskSpec s;
  s.package = "toolz";
  s.version = "0.12.0-1";
  s.fixed_content = "def f(x):\n    return x < 3\n";
  s.broken_content = "def f(x):\n    return x >= 3\n";
  s.fail_to_pass = {"t.py::test_f"};
  s.messages["t.py::test_f"] = "assert False == True";
  ProjectProfile p;
  p.language = "python";
  std::string st = ProblemStatement(s, p);
  EXPECT_NE(st.find("- `t.py::test_f`: assert False == True\n"), std::string::npos) << st;
  EXPECT_EQ(st.find("x < 3"), std::string::npos);
  EXPECT_EQ(st.find("x >= 3"), std::string::npos);
}

TEST(SynthStateTest, KeepsCandidateStatesAndStagesAcrossReopen) {
  testing::TempDir d;
  {
    auto st = SynthState::Open(d.file("synth.db"));
    ASSERT_TRUE(st.ok()) << st.status();
    CandidateRow a;
    a.id = "flip_compare-1-10";
    a.kind = "flip_compare";
    CandidateRow b = a;
    b.id = "off_by_one-1-20";
    ASSERT_TRUE((*st)->AddCandidates({a, b}).ok());
    a.state = "valid";
    a.fail_to_pass = "t::x";
    ASSERT_TRUE((*st)->UpdateCandidate(a).ok());
    ASSERT_TRUE((*st)->CompleteStage("environment", "{}", 2.5).ok());
    ASSERT_TRUE((*st)->Decide("environment", "repo", "accepted", "9 of 10 pass").ok());
  }
  auto st = SynthState::Open(d.file("synth.db"));
  ASSERT_TRUE(st.ok());
  CandidateRow again;
  again.id = "flip_compare-1-10";
  ASSERT_TRUE((*st)->AddCandidates({again}).ok());  // already there: its state stays
  auto rows = (*st)->Candidates();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].state, "valid");
  EXPECT_EQ((*rows)[0].fail_to_pass, "t::x");
  EXPECT_EQ((*rows)[1].state, "generated");
  auto done = (*st)->StageResult("environment");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->value_or(""), "{}");
  EXPECT_FALSE((*st)->StageResult("sources")->has_value());
  auto ds = (*st)->Decisions();
  ASSERT_EQ(ds->size(), 1u);
  EXPECT_EQ((*ds)[0].reason, "9 of 10 pass");
}

}  // namespace
}  // namespace flotilla::synth
