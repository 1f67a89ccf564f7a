// `flotilla run` stopped by SIGINT or SIGTERM mid-run: it stops dispatch and the trainer child,
// stores the samples that were in flight, prints the summary line and exits 128 + signal. The
// run stays unfinished (resumable) and every stored group is complete.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

using testing::Env;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Processes whose command line mentions `needle` (the trainer's --out lies in the temp dir).
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadFile((e.path() / "cmdline").string());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  return n;
}

constexpr char kExperiment[] = R"(name: signal-run
state_dir: runs/signal-run
seed: 3
sandbox_policy: no-network
policy:
  model: {vocab_size: 272, n_layers: 1, d_model: 32, n_heads: 2, n_kv_heads: 2, head_dim: 16,
          n_experts: 2, top_k: 1, n_shared_experts: 1, expert_hidden: 32, max_context: 64}
  init: random
datasets:
  - {name: add, source: "builtin:arith?ops=+&max=9"}
rollout: {group_size: 4, groups_per_step: 2, max_in_flight: 16, staleness: 1, max_new_tokens: 4}
trainer: {sft_steps: 2, rl_steps: 100000, learning_rate: 0.001}
)";

struct SignalCase {
  int signal;
  int exit_code;
};

class RunSignalTest : public ::testing::TestWithParam<SignalCase> {};

TEST_P(RunSignalTest, StopsInOrderAndExitsWithTheSignalCode) {
  testing::TempDir dir;
  std::ofstream(dir.file("experiment.yaml")) << kExperiment;
  const std::string log = dir.file("run.log");
  const std::string db = dir.file("runs/signal-run/trajectories.db");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = freopen(log.c_str(), "w", stdout);
    if (f == nullptr) _exit(126);
    dup2(1, 2);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::string yaml = dir.file("experiment.yaml");
    execl(bin.c_str(), bin.c_str(), "run", "--fresh", yaml.c_str(), nullptr);
    _exit(127);
  }
  // Wait until GRPO is under way: two steps' worth of groups are stored.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  size_t stored_before = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    int early = 0;
    ASSERT_EQ(waitpid(pid, &early, WNOHANG), 0) << "flotilla run ended before the signal:\n" << ReadFile(log);
    if (std::filesystem::exists(db)) {
      auto store = ExperimentStore::Open(db, "signal-run");
      if (store.ok()) {
        auto r = (*store)->Rewards();
        if (r.ok() && r->size() >= 16) {
          stored_before = r->size();
          break;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_GE(stored_before, 16u) << ReadFile(log);
  ASSERT_EQ(kill(pid, GetParam().signal), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::string out = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), GetParam().exit_code) << out;

  // The trainer child was stopped (its command line names the run's weights folder).
  EXPECT_EQ(ProcessesMentioning(dir.file("runs/signal-run/weights")), 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(summary: experiment=signal-run samples=([0-9]+) )"))) << out;
  const size_t summary_samples = std::stoul(m[1]);
  std::string last = out.substr(out.rfind("run: "));
  EXPECT_TRUE(std::regex_match(
      last, std::regex(R"(run: reward_start=[0-9.]+ reward_end=[0-9.]+ steps=[0-9]+ minutes=[0-9.]+ scaffold=[a-z-]+ turns_mean=[0-9.]+ tool_calls_mean=[0-9.]+ sandboxes=[0-9]+\n)")))
      << last;

  auto store = ExperimentStore::Open(db, "signal-run");
  ASSERT_TRUE(store.ok()) << store.status();
  auto rewards = (*store)->Rewards();
  ASSERT_TRUE(rewards.ok());
  EXPECT_EQ(rewards->size(), summary_samples);
  EXPECT_GE(rewards->size(), stored_before);
  EXPECT_EQ(rewards->size() % 4, 0u) << "only whole groups are stored";
  auto finished = (*store)->Finished();
  ASSERT_TRUE(finished.ok());
  EXPECT_FALSE(*finished) << "a stopped run stays resumable";
}

INSTANTIATE_TEST_SUITE_P(Signals, RunSignalTest,
                         ::testing::Values(SignalCase{SIGINT, 130}, SignalCase{SIGTERM, 143}),
                         [](const ::testing::TestParamInfo<SignalCase>& i) {
                           return std::string(i.param.signal == SIGINT ? "Sigint" : "Sigterm");
                         });

}  // namespace
}  // namespace flotilla::trainer_bridge
