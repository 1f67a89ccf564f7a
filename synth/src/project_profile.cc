#include "project_profile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

std::string ReadHead(const fs::path& p, size_t limit = 1 << 20) {
  std::ifstream in(p, std::ios::binary);
  std::string s(limit, '\0');
  in.read(s.data(), static_cast<std::streamsize>(limit));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// Folders never looked into: packaging (Debian's, quilt's) and version control.
bool Ignored(const std::string& top) { return top == ".git" || top == ".pc" || top == "debian"; }

// Folders whose code is neither mutated nor a test: documentation, examples, benchmarks. A C
// project's build-system files in them are still harness files (a doc/Makefile.in becomes a
// Makefile that `make check` enters).
bool Skipped(const std::string& top) {
  static const char* kSkip[] = {"doc", "docs", "examples", "bench", "benchmarks", "conda.recipe",
                                "build", ".tox", "dist", "contrib"};
  for (const char* s : kSkip) {
    if (top == s) return true;
  }
  return false;
}

bool InTestDir(const fs::path& rel) {
  for (const auto& part : rel.parent_path()) {
    if (part == "tests" || part == "test") return true;
  }
  return false;
}

bool IsPythonTest(const fs::path& rel) {
  std::string name = rel.filename().string();
  if (name == "conftest.py") return true;
  if (absl::StartsWith(name, "test_") || absl::EndsWith(name, "_test.py")) return true;
  for (const auto& part : rel.parent_path()) {
    if (part == "tests" || part == "test" || part == "testing") return true;
  }
  return false;
}

// `python_path`: "" or a folder under /app that holds the importable packages (a src layout).
std::string PythonTestScript(const std::string& python_path) {
  return absl::StrCat("cd /app && env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 COLUMNS=400 ",
                      python_path.empty() ? "" : absl::StrCat("PYTHONPATH=/app/", python_path, " "),
                      "python3 -B -s -m pytest -rA -q -p no:cacheprovider --confcutdir=/app --color=no 2>&1");
}

// Build-time packages that only make documentation or Debian packaging, never needed to run tests.
bool DocumentationOrPackaging(const std::string& pkg) {
  for (const char* part : {"sphinx", "docutils", "-doc", "theme", "debhelper", "dh-", "python3-all"}) {
    if (absl::StrContains(pkg, part)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> DebianBuildDepends(const std::string& repo_dir) {
  std::string control = ReadHead(fs::path(repo_dir) / "debian" / "control");
  // The source stanza is the first paragraph; a field continues on lines starting with blanks.
  control = control.substr(0, control.find("\n\n"));
  std::vector<std::string> out;
  std::string field;
  auto take = [&](const std::string& value) {
    for (absl::string_view dep : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      // "a (>= 1) [amd64] <!nocheck> | b": the first alternative, its bare name.
      dep = absl::StripAsciiWhitespace(dep.substr(0, dep.find('|')));
      size_t end = dep.find_first_of(" (\t[<:");
      std::string name(dep.substr(0, end));
      if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  };
  std::string value;
  for (absl::string_view line : absl::StrSplit(control, '\n')) {
    bool continued = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (!continued) {
      if (absl::StartsWith(field, "Build-Depends")) take(value);
      size_t colon = line.find(':');
      field = colon == absl::string_view::npos ? "" : std::string(line.substr(0, colon));
      value = colon == absl::string_view::npos ? "" : std::string(line.substr(colon + 1));
    } else {
      absl::StrAppend(&value, ",", line);
    }
  }
  if (absl::StartsWith(field, "Build-Depends")) take(value);
  return out;
}

namespace {

// The Debian packages a project's tests need beyond the language's own: its Debian build
// dependencies of the language's kind (python3-* for Python, lib*-dev for C), less the ones that
// only build documentation or packaging.
std::vector<std::string> ExtraPackages(const std::string& repo_dir, const std::string& language) {
  std::vector<std::string> extra;
  for (const std::string& d : DebianBuildDepends(repo_dir)) {
    bool kind = language == "python" ? absl::StartsWith(d, "python3-")
                                     : absl::StartsWith(d, "lib") && absl::EndsWith(d, "-dev");
    if (kind && !DocumentationOrPackaging(d)) extra.push_back(d);
  }
  return extra;
}

void AddExtraPackages(const std::string& repo_dir, ProjectProfile& p) {
  std::vector<std::string> extra = ExtraPackages(repo_dir, p.language);
  for (const std::string& e : extra) {
    if (std::find(p.packages.begin(), p.packages.end(), e) == p.packages.end()) p.packages.push_back(e);
  }
  if (!extra.empty()) {
    p.reasons.push_back(absl::StrCat("debian/control's Build-Depends for the tests: ", absl::StrJoin(extra, " ")));
  }
}

}  // namespace

absl::StatusOr<ProjectProfile> DetectProject(const std::string& repo_dir) {
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--repo: '", repo_dir, "' is not a folder"));
  }
  std::vector<std::string> py_src, py_tests, c_src, harness;
  bool has_configure_ac = false, has_makefile_check = false, has_makefile_am_tests = false;
  for (auto it = fs::recursive_directory_iterator(repo_dir, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    fs::path rel = fs::relative(it->path(), repo_dir);
    std::string top = rel.begin()->string();
    if (it.depth() == 0 && it->is_directory() && Ignored(top)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    std::string name = rel.filename().string();
    std::string r = rel.string();
    bool c_code = absl::EndsWith(name, ".c") || absl::EndsWith(name, ".h");
    // A C project's harness is every file but its library code: the tests, the build system
    // (configure, Makefile.in, m4/, build-aux/, the files configure reads) and the rest, so
    // the verifier restores all of it and only .c/.h outside the tests are the agent's.
    if (!c_code || InTestDir(rel)) harness.push_back(r);
    if (rel.has_parent_path() && Skipped(top)) continue;
    if (absl::EndsWith(name, ".py")) {
      if (IsPythonTest(rel)) {
        py_tests.push_back(r);
      } else if (name != "setup.py" && name != "versioneer.py" && name != "_version.py" &&
                 rel.begin() != rel.end() && rel.has_parent_path()) {
        py_src.push_back(r);
      }
    } else if (absl::EndsWith(name, ".c") && !InTestDir(rel)) {
      c_src.push_back(r);
    }
    if (r == "configure.ac") has_configure_ac = true;
    if ((r == "Makefile.am" || absl::EndsWith(r, "/Makefile.am")) && absl::StrContains(ReadHead(it->path()), "TESTS")) {
      has_makefile_am_tests = true;
    }
    if (r == "Makefile" || r == "Makefile.in") {
      std::string mk = ReadHead(it->path());
      if (absl::StrContains(mk, "\ncheck:") || absl::StartsWith(mk, "check:")) has_makefile_check = true;
    }
  }
  std::sort(py_src.begin(), py_src.end());
  std::sort(py_tests.begin(), py_tests.end());
  std::sort(c_src.begin(), c_src.end());
  std::sort(harness.begin(), harness.end());
  harness.erase(std::unique(harness.begin(), harness.end()), harness.end());
  ProjectProfile p;
  if (!py_tests.empty() && !py_src.empty() && py_src.size() >= c_src.size()) {
    p.language = "python";
    p.runner = "pytest";
    p.reasons.push_back(absl::StrCat(py_src.size(), " Python source files and ", py_tests.size(),
                                     " test files (test_*.py, *_test.py, tests/)"));
    p.reasons.push_back(
        "pytest runs both pytest-style and unittest-style tests and reports each test by id (-rA), so it is the "
        "runner either way");
    p.packages = {"python3", "python3-pytest", "git"};
    // A src layout (src/<package>/) is importable from the tree only with src on the path.
    std::string python_path;
    for (const std::string& f : py_src) {
      if (absl::StartsWith(f, "src/")) python_path = "src";
    }
    if (!python_path.empty()) p.reasons.push_back("Python sources under src/: the tests run with PYTHONPATH=/app/src");
    p.test_script = PythonTestScript(python_path);
    p.source_files = py_src;
    p.test_files = py_tests;
    for (const char* cfg : {"pytest.ini", "setup.cfg", "tox.ini", "pyproject.toml"}) {
      if (fs::exists(fs::path(repo_dir) / cfg, ec)) p.test_files.push_back(cfg);
    }
    AddExtraPackages(repo_dir, p);
    return p;
  }
  if (!c_src.empty() && (has_makefile_am_tests || has_makefile_check)) {
    p.language = "c";
    // One package set for every C project (autotools included even where unused), so the
    // environments of all C projects share their installed layers.
    p.packages = {"build-essential", "git", "autoconf", "automake", "libtool", "pkgconf"};
    if (has_configure_ac && has_makefile_am_tests) {
      p.runner = "automake";
      p.reasons.push_back("configure.ac and a Makefile.am with TESTS: automake's harness prints PASS:/FAIL: per test");
      // Static libraries only: libtool then compiles each file once, not twice, and the tests
      // are plain programs rather than wrapper scripts (the suites run the same code).
      p.build_script =
          "cd /app && (test -x configure || autoreconf -fi) && ./configure -q --disable-shared && make -j2";
    } else {
      p.runner = "make-check";
      p.reasons.push_back("a Makefile with a check target: the whole `make check` is one test");
      p.build_script = "cd /app && (test -x configure && ./configure || true) && make -j2";
    }
    p.reasons.push_back(absl::StrCat(c_src.size(), " C source files outside tests/"));
    p.test_script = p.runner == "automake"
                        ? "cd /app && make -j2 check >/tmp/check.out 2>&1; s=$?; cat /tmp/check.out; "
                          "find . -name test-suite.log -exec cat {} +; exit $s"
                        : "cd /app && if make -j2 check 2>&1; then echo 'PASS: make-check'; else echo "
                          "'FAIL: make-check'; fi";
    p.source_files = c_src;
    p.test_files = harness;
    if (p.runner == "automake") {
      // configure's own record of its results, taken from the built base environment: the
      // verifier regenerates the Makefiles, config.h and libtool from the restored inputs with
      // it instead of running configure again (seconds instead of a minute).
      p.test_files.push_back("config.status");
      p.reasons.push_back(
          "the verifier restores every file but the library's .c/.h (config.status included), regenerates the "
          "build files with config.status and rebuilds from clean objects");
    }
    AddExtraPackages(repo_dir, p);
    return p;
  }
  std::vector<std::string> seen;
  if (!py_src.empty()) seen.push_back(absl::StrCat(py_src.size(), " Python files but no test files"));
  if (!c_src.empty()) seen.push_back(absl::StrCat(c_src.size(), " C files but no make check target or TESTS"));
  if (seen.empty()) seen.push_back("no Python or C sources");
  return absl::FailedPreconditionError(absl::StrCat("--repo '", repo_dir, "': no test suite found (",
                                                    absl::StrJoin(seen, "; "), ")"));
}

std::string ProjectDockerfile(const ProjectProfile& p, bool with_git_base) {
  std::ostringstream d;
  d << "FROM debian:bookworm-slim\n";
  // The packages come as .debs in the build context, fetched on the host from its apt
  // configuration (deb_cache.h), so the build needs no network.
  d << "# Debian packages: " << absl::StrJoin(p.packages, " ") << " and their dependencies\n";
  d << "COPY debs/ /tmp/debs/\n";
  // dpkg -i does not order Pre-Depends within one call: each pass gets one level further (at
  // most five passes); dpkg --audit then says whether anything is still half-installed.
  d << "RUN for pass in 1 2 3 4 5; do dpkg -i /tmp/debs/*.deb >>/tmp/dpkg.log 2>&1 && break; done; "
       "dpkg --configure -a >>/tmp/dpkg.log 2>&1; "
       "a=$(dpkg --audit); if [ -n \"$a\" ]; then grep -A4 'dpkg: error' /tmp/dpkg.log | tail -40; echo \"$a\"; exit 1; "
       "fi; rm -rf /tmp/debs /tmp/dpkg.log\n";
  d << "COPY repo/ /app/\n";
  d << "WORKDIR /app\n";
  if (!p.build_script.empty()) d << "RUN " << p.build_script << "\n";
  if (with_git_base) {
    // One commit at the task's base; no reflog, hooks, stash or tags that could carry anything else.
    d << "RUN cd /app && git init -q && git add -A && git -c user.name=synth -c user.email=synth@localhost "
         "commit -q -m base && rm -rf .git/logs .git/hooks .git/refs/stash && git gc -q --prune=now\n";
  }
  return d.str();
}

}  // namespace flotilla::synth
