// Harbor task semantics of the task loader: the Dockerfile and build context of each layout,
// [environment] resources, and the reward of reward.txt / reward.json.
#include <filesystem>
#include <fstream>

#include "flotilla/worker/terminal_task.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::worker {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

void MakeV2(const testing::TempDir& d, const std::string& toml) {
  Write(d.file("task.toml"), toml);
  Write(d.file("instruction.md"), "do it\n");
  Write(d.file("tests/test.sh"), "#!/bin/bash\n");
  Write(d.file("environment/Dockerfile"), "FROM debian:bookworm-slim\n");
}

TEST(HarborTaskTest, V2TaskNamesItsDockerfileContextAndResources) {
  testing::TempDir d;
  MakeV2(d, "[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 20.5\n[environment]\ncpus = 1.5\nmemory_mb = 2048\n"
            "storage_mb = 4096\nbuild_timeout_sec = 600\n");
  auto t = LoadTerminalTask(d.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dockerfile, d.file("environment/Dockerfile"));
  EXPECT_EQ(t->build_context, d.file("environment"));
  EXPECT_EQ(t->dir, d.path().string());
  EXPECT_EQ(t->agent_timeout_ms, 60000u);
  EXPECT_EQ(t->test_timeout_ms, 20500u);
  EXPECT_DOUBLE_EQ(t->cpus, 1.5);
  EXPECT_EQ(t->memory_bytes, 2048ull << 20);
  EXPECT_EQ(t->disk_bytes, 4096ull << 20);
  EXPECT_EQ(t->reward_file, "/logs/verifier/reward.txt");
  EXPECT_EQ(t->reward_json_file, "/logs/verifier/reward.json");
  EXPECT_EQ(t->workdir, "/app");  // until the caller sets the built image's
  EXPECT_TRUE(t->image.empty());
}

TEST(HarborTaskTest, MemoryWithUnitsAndBadFieldsNamed) {
  struct Case {
    std::string toml;
    uint64_t memory;
    std::string error;  // "" when it loads
  } cases[] = {
      {"[environment]\nmemory = \"2G\"\n", 2ull << 30, ""},
      {"[environment]\nmemory = \"512M\"\n", 512ull << 20, ""},
      {"[environment]\nmemory = \"lots\"\n", 0,
       "task.toml: environment.memory: expected a size like \"2G\" or \"512M\", got 'lots'"},
      {"[environment]\ncpus = 0\n", 0, "task.toml: environment.cpus: expected a number in (0, 1024], got '0'"},
      {"[environment]\nmemory_mb = 4\n", 0, "task.toml: environment.memory_mb: expected MiB in [8, 16777216], got '4'"},
      {"[environment]\nstorage_mb = x\n", 0, "task.toml: environment.storage_mb: expected MiB in [1, 16777216], got 'x'"},
      // Found by fuzzing (tests/fuzz/corpus/task_folder): NaN and huge values were converted to
      // integers unchecked, which is undefined behaviour.
      {"[environment]\ncpus = nan\n", 0, "task.toml: environment.cpus: expected a number in (0, 1024], got 'nan'"},
      {"[environment]\nmemory_mb = nan\n", 0,
       "task.toml: environment.memory_mb: expected MiB in [8, 16777216], got 'nan'"},
      {"[environment]\nmemory = \"1e300G\"\n", 0,
       "task.toml: environment.memory: expected a size like \"2G\" or \"512M\", got '1e300G'"},
      {"[agent]\ntimeout_sec = inf\n", 0, "task.toml: agent.timeout_sec: expected seconds in (0, 86400], got 'inf'"},
  };
  for (const Case& c : cases) {
    testing::TempDir d;
    MakeV2(d, c.toml);
    auto t = LoadTerminalTask(d.path().string());
    if (c.error.empty()) {
      ASSERT_TRUE(t.ok()) << c.toml << t.status();
      EXPECT_EQ(t->memory_bytes, c.memory) << c.toml;
    } else {
      EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.toml;
      EXPECT_EQ(t.status().message(), "task " + d.path().string() + ": " + c.error) << c.toml;
    }
  }
}

TEST(HarborTaskTest, V1TaskBuildsFromItsOwnFolder) {
  testing::TempDir d;
  Write(d.file("task.yaml"), "instruction: count\n");
  Write(d.file("run-tests.sh"), "#!/bin/bash\n");
  Write(d.file("Dockerfile"), "FROM debian:bookworm-slim\n");
  auto t = LoadTerminalTask(d.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dockerfile, d.file("Dockerfile"));
  EXPECT_EQ(t->build_context, d.path().string());
  EXPECT_TRUE(t->reward_json_file.empty());
}

// Found by fuzzing (tests/fuzz/corpus/task_folder): a task.yaml that is a scalar or a list made
// yaml-cpp throw from operator[], which ended the process.
TEST(HarborTaskTest, V1TaskYamlThatIsNoMappingIsRefused) {
  for (const char* yaml : {"just text\n", "- a\n- b\n", "", "instruction: [1, 2]\n", "instruction: x\nmax_agent_timeout_sec: .nan\n"}) {
    testing::TempDir d;
    Write(d.file("task.yaml"), yaml);
    Write(d.file("run-tests.sh"), "#!/bin/bash\n");
    auto t = LoadTerminalTask(d.path().string());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
    const std::string text = yaml;
    const std::string want = text.rfind("instruction: x", 0) == 0 ? "task.yaml: max_agent_timeout_sec: out of range"
                             : text.rfind("instruction", 0) == 0  ? "task.yaml: instruction: required string"
                                                                  : "task.yaml: expected a mapping of fields";
    EXPECT_EQ(t.status().message(), "task " + d.path().string() + ": " + want) << yaml;
  }
}

TEST(HarborTaskTest, RewardJsonScalarRewardMemberOrMean) {
  EXPECT_EQ(*ParseRewardJson("0.75", "r.json"), 0.75);
  EXPECT_EQ(*ParseRewardJson("{\"reward\": 1, \"style\": 0}", "r.json"), 1.0);
  EXPECT_EQ(*ParseRewardJson("{\"a\": 1, \"b\": 0, \"note\": \"x\"}", "r.json"), 0.5);
  EXPECT_EQ(ParseRewardJson("{\"reward\": \"yes\"}", "/logs/verifier/reward.json").status().message(),
            "/logs/verifier/reward.json: reward: expected a number");
  EXPECT_EQ(ParseRewardJson("{}", "r.json").status().message(), "r.json: no numeric member to take the reward from");
  EXPECT_EQ(ParseRewardJson("[1]", "r.json").status().message(), "r.json: expected a number or an object");
  EXPECT_EQ(ParseRewardJson("nope", "r.json").status().message(), "r.json: not JSON");
}

}  // namespace
}  // namespace flotilla::worker
