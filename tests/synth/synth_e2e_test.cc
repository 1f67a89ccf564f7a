// `flotilla synth` end to end on a small project (tests/synth/testdata/tally: five functions,
// ten pytest tests; the figures of real Debian source packages are in bench/RESULTS.md). One
// task is synthesized; `flotilla eval` scores it 1 with the oracle and 0 with nop; the
// synthesizer's hackability probes (deleting or editing the tests, replacing the runner, leaks)
// passed; the oracle as the difficulty policy labels it easy; a rerun resumes without trying
// anything again; `flotilla run` trains on the
// task folder (each sample a mini episode in the task's own built environment). Bad input ends
// with a report of what was tried: a tree without tests, a build that fails, a project where no
// mutation validates. Needs root and the environment store's base image; skips visibly otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "flotilla/common/text_files.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/logged_run.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

using testing::Env;

using Ran = testing::LoggedRun;

Ran Exec(const testing::TempDir& dir, const std::string& name, std::vector<std::string> argv) {
  return testing::RunLogged(std::move(argv), dir.file(name + ".log"));
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::vector<fs::path> TaskFolders(const std::string& tasks) {
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(tasks)) {
    if (fs::exists(e.path() / "task.toml")) folders.push_back(e.path());
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

class SynthE2eTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
    if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
    if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror for the environments";
    bin_ = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    store_ = Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla");
  }
  std::vector<std::string> SynthArgv(const std::string& repo, const std::string& out, int max_tasks, int max_candidates) {
    return {bin_, "synth", "--repo", repo, "--out", out, "--package", "tally", "--version", "1.0",
            "--max-tasks", std::to_string(max_tasks), "--max-candidates", std::to_string(max_candidates),
            "--env-store", store_, "--difficulty-agent", "oracle", "--difficulty-attempts", "1"};
  }
  // The fixture's tasks, synthesized once for the suite (the first test that needs them).
  std::string Tasks() {
    if (dir_ == nullptr) {
      dir_ = new testing::TempDir();
      Ran s = Exec(*dir_, "synth", SynthArgv(Env("FLOTILLA_SOURCE_DIR", ".") + "/tests/synth/testdata/tally",
                                              dir_->file("tasks"), 1, 8));
      synth_ = s;
    }
    return dir_->file("tasks");
  }
  std::string bin_, store_;
  static testing::TempDir* dir_;
  static Ran synth_;
};

testing::TempDir* SynthE2eTest::dir_ = nullptr;
Ran SynthE2eTest::synth_;

TEST_F(SynthE2eTest, TasksPassOracleFailNopResistAndResume) {
  std::string tasks = Tasks();
  ASSERT_EQ(synth_.status, 0) << synth_.out;
  EXPECT_NE(synth_.out.find("environment: base run 1: 10 passed, 0 failed, 0 skipped"), std::string::npos) << synth_.out;
  EXPECT_NE(synth_.out.find(" valid=1 "), std::string::npos) << synth_.out;
  std::vector<fs::path> folders = TaskFolders(tasks);
  ASSERT_EQ(folders.size(), 1u);
  for (const fs::path& f : folders) {
    std::string toml = ReadFileOrEmpty(f / "task.toml");
    EXPECT_NE(toml.find("package = \"tally\""), std::string::npos) << toml;
    EXPECT_NE(toml.find("version = \"1.0\""), std::string::npos) << toml;
    EXPECT_NE(toml.find("fail_to_pass = [\"tests/test_core.py::test_"), std::string::npos) << toml;
    EXPECT_FALSE(fs::exists(f / "environment" / "repo" / ".git"));
    EXPECT_TRUE(fs::exists(f / "tests" / "test.sh"));
    EXPECT_TRUE(fs::exists(f / "solution" / "solve.sh"));
    // The verifier's fingerprint of the runner: a sha256 and a newline.
    EXPECT_EQ(ReadFileOrEmpty(f / "tests" / "runner.sha256").size(), 65u);
    // The difficulty stage, with the oracle as the policy: solved at its one attempt.
    EXPECT_NE(toml.find("[metadata]\ndifficulty = \"easy\"\n"), std::string::npos) << toml;
    EXPECT_NE(toml.find("[synth.difficulty]\nsolve_rate = 1\nattempts = 1\nsolved = 1\nlabel = \"easy\"\n"
                        "policy = \"oracle\"\n"),
              std::string::npos)
        << toml;
  }
  EXPECT_NE(synth_.out.find("difficulty: policy=oracle attempts=1 tasks=1 measured=1 resumed=0 unknown=0 trials=1 "
                            "easy=1 "),
            std::string::npos)
      << synth_.out;
  Ran stats = Exec(*dir_, "stats", {bin_, "synth", "stats", "--out", tasks});
  ASSERT_EQ(stats.status, 0) << stats.out;
  EXPECT_NE(stats.out.find("seconds_per_valid_task="), std::string::npos) << stats.out;

  for (const auto& [agent, passed] : {std::pair<std::string, std::string>{"oracle", "1"}, {"nop", "0"}}) {
    Ran ev = Exec(*dir_, "eval-" + agent, {bin_, "eval", "--tasks", tasks, "--state-dir", dir_->file("state-" + agent),
                                           "--harness", "mini", "--agent", agent, "--env-store", store_});
    ASSERT_EQ(ev.status, 0) << ev.out;
    EXPECT_NE(ev.out.find("eval: harness=mini tasks=1 passed=" + passed), std::string::npos) << agent << "\n" << ev.out;
  }

  // A rerun resumes: nothing is tried again, the same task is reported.
  Ran again = Exec(*dir_, "synth-again",
                   SynthArgv(Env("FLOTILLA_SOURCE_DIR", ".") + "/tests/synth/testdata/tally", tasks, 1, 8));
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("environment: resumed"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("synth: validate ["), std::string::npos) << again.out;
  EXPECT_NE(again.out.find(" valid=1 "), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("measured=0 resumed=1 unknown=0 trials=0 "), std::string::npos) << again.out;
}

// The one RL path over a synthesized task folder: a short GRPO run from a random-init policy
// whose every sample is a mini episode in the task's own environment, verified by its tests. One
// sample at a time (groups of one): a synthesized task asks for a whole CPU, and the machine may
// have two.
TEST_F(SynthE2eTest, ShortExperimentTrainsOnTheSynthesizedFolder) {
  std::string tasks = Tasks();
  ASSERT_EQ(synth_.status, 0) << synth_.out;
  std::vector<fs::path> folders = TaskFolders(tasks);
  ASSERT_EQ(folders.size(), 1u);
  Write(dir_->file("rl/experiment.yaml"),
        "name: synth-rl\nstate_dir: run\nseed: 5\nscaffold: mini\nsandbox_policy: no-network\n"
        "policy:\n  model: {vocab_size: 272, n_layers: 2, d_model: 32, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
        "          n_experts: 4, top_k: 2, n_shared_experts: 1, expert_hidden: 32, max_context: 2048}\n"
        "  init: random\n"
        "datasets:\n  - {name: synth, source: \"" + tasks + "\", weight: 1}\n"
        "rollout: {group_size: 1, groups_per_step: 2, max_in_flight: 1, staleness: 1, max_new_tokens: 16,\n"
        "          max_turns: 2, length_bias: {enabled: false}}\n"
        "trainer: {sft_steps: 0, rl_steps: 1, learning_rate: 0.0003, publish_every: 1}\n");
  Ran run = Exec(*dir_, "run", {bin_, "run", "--fresh", dir_->file("rl/experiment.yaml"), "--env-store", store_});
  ASSERT_EQ(run.status, 0) << run.out;
  const std::string last = run.out.substr(run.out.rfind("run: reward_start="));
  std::smatch m;
  std::regex re(R"(^run: reward_start=([0-9.]+) reward_end=([0-9.]+) steps=([0-9]+) minutes=([0-9.]+) scaffold=mini)"
                R"( turns_mean=([0-9.]+) tool_calls_mean=([0-9.]+) sandboxes=([0-9]+)\n?$)");
  ASSERT_TRUE(std::regex_match(last, m, re)) << last;
  EXPECT_GE(std::stoi(m[3]), 1);
  auto store = trainer_bridge::ExperimentStore::Open(dir_->file("rl/run/trajectories.db"), "synth-rl");
  ASSERT_TRUE(store.ok()) << store.status();
  auto figures = (*store)->Figures();
  ASSERT_TRUE(figures.ok());
  EXPECT_GE(figures->samples, 2);
  EXPECT_EQ(figures->failed, 0);
  worker::TrajectoryQuery q;
  q.experiment = "synth-rl";
  int seen = 0;
  ASSERT_TRUE((*store)->trajectories().ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
    if (t.group_id().empty()) return absl::OkStatus();
    ++seen;
    EXPECT_EQ(t.task(), folders[0].filename().string());
    // A random policy does not fix the bug: the task's hidden tests score it 0.
    EXPECT_EQ(t.reward(), 0.0) << t.id();
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(seen, figures->samples);
}

TEST_F(SynthE2eTest, TreeWithoutTestsEndsWithAReport) {
  testing::TempDir dir;
  Write(dir.file("repo/pkg/core.py"), "def f():\n    return 1\n");
  Ran s = Exec(dir, "synth", {bin_, "synth", "--repo", dir.file("repo"), "--out", dir.file("out"), "--env-store", store_});
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_NE(s.out.find("no test suite found (1 Python files but no test files)"), std::string::npos) << s.out;
  std::string report = ReadFileOrEmpty(dir.file("out/REPORT.txt"));
  EXPECT_NE(report.find("flotilla synth: no tasks from " + dir.file("repo")), std::string::npos) << report;
  EXPECT_NE(report.find("environment: " + dir.file("repo") + ": refused (--repo '"), std::string::npos) << report;
}

TEST_F(SynthE2eTest, BuildThatFailsEndsWithAReport) {
  testing::TempDir dir;
  Write(dir.file("repo/Makefile"), "all: lib.o\ncheck: all\n\ttest -f lib.o\n");
  Write(dir.file("repo/lib.c"), "int twice(int x) { return 2 * x }\n");  // the ';' is missing
  Ran s = Exec(dir, "synth", {bin_, "synth", "--repo", dir.file("repo"), "--out", dir.file("out"), "--env-store", store_});
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_NE(s.out.find("the environment does not build: "), std::string::npos) << s.out;
  std::string report = ReadFileOrEmpty(dir.file("out/REPORT.txt"));
  // What was tried: the language and runner chosen, then the build that failed, with its line.
  EXPECT_NE(report.find("environment: language: c/make-check (a Makefile with a check target"), std::string::npos)
      << report;
  EXPECT_NE(report.find(": refused (the environment does not build: "), std::string::npos) << report;
  EXPECT_NE(report.find("RUN cd /app && (test -x configure && ./configure || true) && make -j2"), std::string::npos)
      << report;
}

TEST_F(SynthE2eTest, NoMutationThatValidatesEndsWithAReport) {
  testing::TempDir dir;
  // Tests that pass whatever the code does: no mutation can break one.
  Write(dir.file("repo/weak/__init__.py"), "");
  Write(dir.file("repo/weak/core.py"), "def f(x):\n    if x > 1:\n        return x - 1\n    return x + 1\n");
  Write(dir.file("repo/tests/test_weak.py"), "import weak.core\n\n\ndef test_imports():\n    assert weak.core.f\n");
  Ran s = Exec(dir, "synth", {bin_, "synth", "--repo", dir.file("repo"), "--out", dir.file("out"), "--max-candidates",
                              "3", "--env-store", store_});
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_NE(s.out.find("no candidate became a valid task after 3 tries"), std::string::npos) << s.out;
  std::string report = ReadFileOrEmpty(dir.file("out/REPORT.txt"));
  EXPECT_NE(report.find("environment: " + dir.file("repo") + ": accepted (1 of 1 tests pass"), std::string::npos)
      << report;
  EXPECT_NE(report.find("candidates tried: 3 of "), std::string::npos) << report;
  EXPECT_NE(report.find("  3 x rejected: no fail-to-pass test: every test passes with the bug (e.g. "),
            std::string::npos)
      << report;
  EXPECT_TRUE(TaskFolders(dir.file("out")).empty());
}

}  // namespace
}  // namespace flotilla::synth
