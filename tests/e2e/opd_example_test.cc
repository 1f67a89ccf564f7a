// The OPD example in a short form, through its own script: a teacher per sub-domain is trained
// by the real trainer (SFT on that sub-domain), then the student is distilled with the
// engine's Score API: every batch sample carries full-vocabulary teacher logprobs of the
// teacher mapped to its dataset, and the run ends with the summary line.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::cli {
namespace {

using testing::Env;

// The example's experiment with fewer student steps; teacher configs are copied beside it.
std::string ShortExperiment(const std::string& source_dir, const testing::TempDir& dir) {
  namespace fs = std::filesystem;
  const fs::path example = fs::path(source_dir) / "examples/arith-opd";
  for (const char* f : {"teacher.json", "arith-grpo-teacher.json"}) fs::copy_file(example / f, dir.file(f));
  std::ifstream in(example / "experiment.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), {});
  yaml = std::regex_replace(yaml, std::regex(R"(rl_steps: [0-9]+)"), "rl_steps: 40");
  std::ofstream(dir.file("experiment.yaml")) << yaml;
  return dir.file("experiment.yaml");
}

TEST(OpdExampleTest, TrainsTeachersPerSubDomainThenDistills) {
  testing::TempDir dir;
  const std::string source = Env("FLOTILLA_SOURCE_DIR", ".");
  const std::string yaml = ShortExperiment(source, dir);
  std::string cmd = "TEACHER_STEPS=60 " + source + "/examples/arith-opd/run.sh " + yaml + " 2>&1";
  int status = 0;
  const std::string out = testing::RunShell(cmd, &status);
  ASSERT_EQ(status, 0) << out;

  // One teacher per sub-domain, each trained on its own dataset only.
  EXPECT_NE(out.find("teacher add-teacher/add step=60/60"), std::string::npos) << out;
  EXPECT_NE(out.find("teacher mul-teacher/mul step=60/60"), std::string::npos) << out;
  EXPECT_EQ(out.find("teacher add-teacher/mul"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("runs/arith-opd-teachers/add.safetensors")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("runs/arith-opd-teachers/mul.safetensors")));
  // Distillation scored every sample (a failed scoring is logged) and trained on reverse KL.
  EXPECT_NE(out.find("published v0; starting opd"), std::string::npos) << out;
  EXPECT_EQ(out.find("teacher scoring failed"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(summary: trainer\.reverse_kl=([0-9.e+-]+))"))) << out;
  EXPECT_GT(std::stod(m[1]), 0.0);
  std::string last = out.substr(out.rfind("run: "));
  ASSERT_TRUE(std::regex_match(last, m, std::regex(R"(run: reward_start=[0-9.]+ reward_end=[0-9.]+ steps=([0-9]+) minutes=[0-9.]+ scaffold=[a-z-]+ turns_mean=[0-9.]+ tool_calls_mean=[0-9.]+ sandboxes=[0-9]+\n)")))
      << last;
  EXPECT_GE(std::stoi(m[1]), 40);
}

}  // namespace
}  // namespace flotilla::cli
