#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/tokenizer.h"
#include "gtest/gtest.h"

namespace flotilla::inference {
namespace {

TEST(TokenizerTest, BytesRoundTripIncludingUtf8AndNul) {
  std::string text("caf\xc3\xa9\n\0tab\t", 10);
  std::vector<int32_t> ids = Encode(text);
  ASSERT_EQ(ids.size(), 10u);
  EXPECT_EQ(ids[3], 0xc3);
  EXPECT_EQ(ids[6], 0);
  EXPECT_EQ(Decode(ids), text);
}

TEST(TokenizerTest, SpecialTokensRenderByNameOrAreSkipped) {
  std::vector<int32_t> ids = {kBos, 'h', 'i', kEndTurn};
  EXPECT_EQ(Decode(ids), "<|bos|>hi<|end|>");
  EXPECT_EQ(Decode(ids, /*skip_special=*/true), "hi");
  EXPECT_EQ(SpecialName(kToolCallBegin), "<|tool_call|>");
  EXPECT_EQ(Encode("<|end|>").size(), 7u);  // text never yields specials
}

TEST(ChatTemplateTest, RendersTheDocumentedLayout) {
  std::vector<ChatMessage> msgs = {{ChatMessage::Role::kSystem, "s", {}, ""},
                                   {ChatMessage::Role::kUser, "u", {}, ""}};
  std::vector<int32_t> want = {kBos, kSystem, 's', kEndTurn, kUser, 'u', kEndTurn, kAssistant};
  EXPECT_EQ(RenderConversation(msgs, true), want);
  want.pop_back();
  EXPECT_EQ(RenderConversation(msgs, false), want);
}

TEST(ChatTemplateTest, ToolCallsRoundTrip) {
  ChatMessage m{ChatMessage::Role::kAssistant, "running it",
                {{"x", "bash", "{\"cmd\":\"ls -la\"}"}, {"y", "read", "{\"path\":\"a.txt\"}"}}, ""};
  std::vector<int32_t> ids = RenderMessage(m);
  ASSERT_EQ(ids.front(), kAssistant);
  ASSERT_EQ(ids.back(), kEndTurn);
  std::vector<int32_t> body(ids.begin() + 1, ids.end() - 1);
  ParsedReply r = ParseAssistantReply(body);
  EXPECT_EQ(r.text, "running it");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "bash");
  EXPECT_EQ(r.tool_calls[0].arguments_json, "{\"cmd\":\"ls -la\"}");
  EXPECT_EQ(r.tool_calls[0].id, "call_0");
  EXPECT_EQ(r.tool_calls[1].name, "read");
  EXPECT_EQ(r.tool_calls[1].id, "call_1");
}

struct MalformedCase {
  const char* name;
  std::vector<int32_t> ids;
  std::string text;
};

TEST(ChatTemplateTest, MalformedToolCallsBecomeText) {
  auto bytes = [](std::string s) { return Encode(s); };
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  std::vector<MalformedCase> cases = {
      {"bad json", cat({bytes("a"), {kToolCallBegin}, bytes("{not json"), {kToolCallEnd}}),
       "a<|tool_call|>{not json<|/tool_call|>"},
      {"unclosed", cat({{kToolCallBegin}, bytes("{\"name\": \"x\"}")}), "<|tool_call|>{\"name\": \"x\"}"},
      {"no name", cat({{kToolCallBegin}, bytes("{\"arguments\": {}}"), {kToolCallEnd}}),
       "<|tool_call|>{\"arguments\": {}}<|/tool_call|>"},
      {"args not object", cat({{kToolCallBegin}, bytes("{\"name\": \"x\", \"arguments\": 3}"), {kToolCallEnd}}),
       "<|tool_call|>{\"name\": \"x\", \"arguments\": 3}<|/tool_call|>"},
      {"nested begin", cat({{kToolCallBegin}, bytes("{"), {kToolCallBegin}, bytes("{\"name\": \"y\"}"), {kToolCallEnd}}),
       "<|tool_call|>{"},
  };
  for (const MalformedCase& c : cases) {
    ParsedReply r = ParseAssistantReply(c.ids);
    if (std::string(c.name) == "nested begin") {
      EXPECT_EQ(r.text, c.text) << c.name;
      ASSERT_EQ(r.tool_calls.size(), 1u) << c.name;
      EXPECT_EQ(r.tool_calls[0].name, "y");
    } else {
      EXPECT_EQ(r.text, c.text) << c.name;
      EXPECT_TRUE(r.tool_calls.empty()) << c.name;
    }
  }
}

}  // namespace
}  // namespace flotilla::inference
