// `flotilla synth --difficulty-only` on a hand-made folder of two tasks, with the oracle and nop
// as the policy so that the solve rates are known: "fixable" (its solution passes its tests)
// and "nofix" (its solution changes nothing). The oracle solves fixable every time (easy) and
// nofix never (unsolved); the band 0.5:1 moves nofix to excluded/ with its reason in synth.db
// and task.toml; "nobuild", whose environment does not build, stays unknown with the reason and
// where it is; a rerun measures nothing again (and tries nobuild again); more attempts add to
// the recorded ones; the band 0:0.5 swaps the two without a trial;
// nop, another policy, is measured on both (excluded/'s too). Needs root; skips visibly
// otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "flotilla/common/text_files.h"
#include "flotilla/synth/synth_state.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/logged_run.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

using testing::Env;

void Write(const fs::path& p, const std::string& text, fs::perms mode = fs::perms(0644)) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  fs::permissions(p, mode);
}

// A task whose test wants /app/done.txt to say "done"; its solution writes `solution_writes`.
void MakeTask(const fs::path& dir, const std::string& solution_writes) {
  Write(dir / "instruction.md", "Write the word done to /app/done.txt.\n");
  Write(dir / "task.toml",
        "version = \"1.0\"\n\n[metadata]\ndifficulty = \"unknown\"\ncategory = \"test\"\n\n"
        "[agent]\ntimeout_sec = 60.0\n\n[verifier]\ntimeout_sec = 30.0\n");
  Write(dir / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n");
  Write(dir / "solution" / "solve.sh", "#!/bin/bash\necho " + solution_writes + " > /app/done.txt\n", fs::perms(0755));
  Write(dir / "tests" / "test.sh",
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ \"$(cat /app/done.txt 2>/dev/null)\" = done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
        fs::perms(0755));
}

using Ran = testing::LoggedRun;

Ran Synth(const testing::TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
  std::string log = dir.file(name + ".log");
  std::vector<std::string> argv = {Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla", "synth", "--difficulty-only",
                                   "--out", dir.file("tasks"), "--env-store",
                                   Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla")};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunLogged(std::move(argv), log);
}

bool Has(const std::string& out, const std::string& text) { return out.find(text) != std::string::npos; }

TEST(SynthDifficultyE2eTest, OracleAndNopLabelBandMoveResume) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  testing::TempDir dir;
  const fs::path tasks = dir.file("tasks");
  MakeTask(tasks / "fixable", "done");
  MakeTask(tasks / "nofix", "not-yet");
  MakeTask(tasks / "nobuild", "done");
  Write(tasks / "nobuild" / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nRUN exit 3\n");

  Ran first = Synth(dir, "first", {"--difficulty-agent", "oracle", "--difficulty-attempts", "2",
                                   "--difficulty-band", "0.5:1"});
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_TRUE(Has(first.out, "synth: difficulty: fixable: easy (solve rate 1: solved 2 of 2 attempts by oracle)"))
      << first.out;
  EXPECT_TRUE(Has(first.out, "synth: difficulty: nofix: unsolved (solve rate 0: solved 0 of 2 attempts by oracle)"))
      << first.out;
  EXPECT_TRUE(Has(first.out, "synth: difficulty: nobuild: unknown (the task does not load or build: task nobuild: "
                             "building its environment"))
      << first.out;
  EXPECT_TRUE(Has(first.out, "difficulty: policy=oracle attempts=2 tasks=3 measured=2 resumed=0 unknown=1 trials=4 "
                             "easy=1 medium=0 hard=0 unsolved=1 band=0.5:1 excluded=1\n"))
      << first.out;
  ASSERT_TRUE(fs::exists(tasks / "fixable" / "task.toml"));
  ASSERT_FALSE(fs::exists(tasks / "nofix"));
  ASSERT_TRUE(fs::exists(tasks / "excluded" / "nofix" / "task.toml"));
  ASSERT_TRUE(fs::exists(tasks / "nobuild" / "task.toml"));
  EXPECT_TRUE(Has(ReadFileOrEmpty(tasks / "nobuild" / "task.toml"), "[metadata]\ndifficulty = \"unknown\"\n"));
  const std::string fixable = ReadFileOrEmpty(tasks / "fixable" / "task.toml");
  EXPECT_TRUE(Has(fixable, "[metadata]\ndifficulty = \"easy\"\n")) << fixable;
  EXPECT_TRUE(Has(fixable, "[synth.difficulty]\nsolve_rate = 1\nattempts = 2\nsolved = 2\nlabel = \"easy\"\n"
                           "policy = \"oracle\"\nreason = \"solved 2 of 2 attempts by oracle\"\n"
                           "band = \"kept: solve rate 1 within the band [0.5, 1]\"\n"))
      << fixable;
  const std::string nofix = ReadFileOrEmpty(tasks / "excluded" / "nofix" / "task.toml");
  EXPECT_TRUE(Has(nofix, "band = \"excluded: solve rate 0 below the band [0.5, 1]\"\n")) << nofix;
  // Each trial's result, as an eval job keeps it.
  for (const char* t : {"fixable__oracle__1", "fixable__oracle__2", "nofix__oracle__1", "nofix__oracle__2"}) {
    EXPECT_TRUE(fs::exists(tasks / ".work" / "difficulty" / "oracle" / t / "result.json")) << t;
  }
  {
    auto st = SynthState::Open((tasks / "synth.db").string());
    ASSERT_TRUE(st.ok()) << st.status();
    auto ds = (*st)->Decisions();
    ASSERT_TRUE(ds.ok());
    std::vector<std::string> seen;
    for (const DecisionRow& d : *ds) seen.push_back(d.stage + "|" + d.subject + "|" + d.decision + "|" + d.reason);
    ASSERT_EQ(seen.size(), 4u);
    EXPECT_EQ(seen[0].rfind("difficulty|nobuild|unknown|the task does not load or build: task nobuild: building its "
                            "environment",
                            0),
              0u)
        << seen[0];
    EXPECT_TRUE(Has(seen[0], "RUN exit 3")) << seen[0];
    seen.erase(seen.begin());
    EXPECT_EQ(seen, (std::vector<std::string>{
                        "difficulty|fixable|easy|solve rate 1: solved 2 of 2 attempts by oracle",
                        "difficulty|nofix|unsolved|solve rate 0: solved 0 of 2 attempts by oracle",
                        "difficulty|nofix|excluded|excluded: solve rate 0 below the band [0.5, 1] (solved 0 of 2 "
                        "attempts by oracle); moved to excluded/nofix"}));
  }

  // A rerun measures nothing again.
  Ran again = Synth(dir, "again", {"--difficulty-agent", "oracle", "--difficulty-attempts", "2",
                                   "--difficulty-band", "0.5:1"});
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_TRUE(Has(again.out, "synth: difficulty: fixable: resumed (easy, solved 2 of 2 by oracle)")) << again.out;
  EXPECT_TRUE(Has(again.out, "synth: difficulty: nobuild: unknown (")) << again.out;
  EXPECT_TRUE(Has(again.out, "measured=0 resumed=2 unknown=1 trials=0 easy=1 medium=0 hard=0 unsolved=1 band=0.5:1 "
                             "excluded=1\n"))
      << again.out;

  // Another band: the two swap places, from the recorded rates.
  Ran swap = Synth(dir, "swap", {"--difficulty-agent", "oracle", "--difficulty-attempts", "2",
                                 "--difficulty-band", "0:0.5"});
  ASSERT_EQ(swap.status, 0) << swap.out;
  EXPECT_TRUE(Has(swap.out, "trials=0 ")) << swap.out;
  EXPECT_TRUE(fs::exists(tasks / "nofix" / "task.toml"));
  EXPECT_TRUE(fs::exists(tasks / "excluded" / "fixable" / "task.toml"));
  EXPECT_TRUE(Has(swap.out, "synth: difficulty: nofix: restored (kept: solve rate 0 within the band [0, 0.5] (solved "
                            "0 of 2 attempts by oracle); moved to nofix)"))
      << swap.out;
  EXPECT_TRUE(Has(ReadFileOrEmpty(tasks / "excluded" / "fixable" / "task.toml"),
                  "band = \"excluded: solve rate 1 above the band [0, 0.5]\"\n"));

  // More attempts add to the recorded ones: one new trial per measured task.
  Ran more = Synth(dir, "more", {"--difficulty-agent", "oracle", "--difficulty-attempts", "3",
                                 "--difficulty-band", "0:0.5"});
  ASSERT_EQ(more.status, 0) << more.out;
  EXPECT_TRUE(Has(more.out, "synth: difficulty [1/2] fixable__oracle__3 reward=1\n")) << more.out;
  EXPECT_TRUE(Has(more.out, "synth: difficulty: fixable: easy (solve rate 1: solved 3 of 3 attempts by oracle)"))
      << more.out;
  EXPECT_TRUE(Has(more.out, "measured=2 resumed=0 unknown=1 trials=2 easy=1 medium=0 hard=0 unsolved=1 band=0:0.5 "
                            "excluded=1\n"))
      << more.out;

  // Another policy is measured on its own, excluded/'s tasks included; without a band nothing moves.
  Ran nop = Synth(dir, "nop", {"--difficulty-agent", "nop", "--difficulty-attempts", "1"});
  ASSERT_EQ(nop.status, 0) << nop.out;
  EXPECT_TRUE(Has(nop.out, "difficulty: policy=nop attempts=1 tasks=3 measured=2 resumed=0 unknown=1 trials=2 easy=0 "
                           "medium=0 hard=0 unsolved=2 band=none excluded=1\n"))
      << nop.out;
  EXPECT_TRUE(fs::exists(tasks / "excluded" / "fixable" / "task.toml"));
  EXPECT_TRUE(Has(ReadFileOrEmpty(tasks / "excluded" / "fixable" / "task.toml"), "policy = \"nop\"\n"));

  {
    // `synth stats` over the folder: each policy's labels and the excluded tasks.
    std::string log = dir.file("stats.log");
    std::string cmd = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla synth stats --out " + tasks.string() + " > " +
                      log + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFileOrEmpty(log);
    const std::string out = ReadFileOrEmpty(log);
    EXPECT_TRUE(Has(out, "  difficulty:  nop: easy=0 medium=0 hard=0 unsolved=2\n")) << out;
    EXPECT_TRUE(Has(out, "  difficulty:  oracle: easy=1 medium=0 hard=0 unsolved=1\n")) << out;
    EXPECT_TRUE(Has(out, "  excluded:    1 tasks outside the difficulty band (excluded/)\n")) << out;
  }

  // Bad input: a band that is not one, an agent it cannot run.
  Ran bad = Synth(dir, "bad", {"--difficulty-agent", "oracle", "--difficulty-band", "0.9:0.1"});
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_TRUE(Has(bad.out, "--difficulty-band '0.9:0.1': expected LO:HI with 0 <= LO <= HI <= 1")) << bad.out;
  Ran cli = Synth(dir, "cli", {"--difficulty-agent", "pi"});
  EXPECT_EQ(cli.status, 2) << cli.out;
  EXPECT_TRUE(Has(cli.out, "--difficulty-agent 'pi': expected oracle, nop, mini or terminal")) << cli.out;
  Ran none = Synth(dir, "none", {});
  EXPECT_EQ(none.status, 2) << none.out;
  EXPECT_TRUE(Has(none.out, "--difficulty-only needs --difficulty-agent")) << none.out;
}

}  // namespace
}  // namespace flotilla::synth
