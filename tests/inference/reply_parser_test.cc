// The streaming reply parsers: every case fed at once, split in two at every byte position,
// and one byte at a time must give exactly the same content, reasoning and tool calls.
#include "flotilla/inference/reply_parser.h"
#include "gtest/gtest.h"

namespace flotilla::inference {
namespace {

struct Result {
  std::string content;
  std::string reasoning;
  std::vector<std::string> calls;  // "id name arguments"
  bool operator==(const Result& o) const {
    return content == o.content && reasoning == o.reasoning && calls == o.calls;
  }
};

std::ostream& operator<<(std::ostream& os, const Result& r) {
  os << "content=[" << r.content << "] reasoning=[" << r.reasoning << "] calls=";
  for (const auto& c : r.calls) os << "{" << c << "}";
  return os;
}

void Add(Result& r, const ReplyDelta& d) {
  r.content += d.content;
  r.reasoning += d.reasoning;
  for (const ToolCall& c : d.tool_calls) r.calls.push_back(c.id + " " + c.name + " " + c.arguments_json);
}

Result Parse(const ReplyParserOptions& options, const std::vector<std::string>& deltas) {
  ReplyParser p(options);
  Result r;
  for (const std::string& d : deltas) Add(r, p.Feed(d));
  Add(r, p.Finish());
  return r;
}

struct Case {
  std::string name;
  ReplyParserOptions options;
  std::string text;
  Result want;
};

ReplyParserOptions Opts(ToolCallFormat f, bool starts_in_reasoning = false) {
  ReplyParserOptions o;
  o.format = f;
  o.starts_in_reasoning = starts_in_reasoning;
  return o;
}

std::vector<Case> Cases() {
  const std::string ds_begin = "<｜tool▁calls▁begin｜>", ds_end = "<｜tool▁calls▁end｜>";
  const std::string call_begin = "<｜tool▁call▁begin｜>", call_end = "<｜tool▁call▁end｜>", sep = "<｜tool▁sep｜>";
  ReplyParserOptions coder_typed = Opts(ToolCallFormat::kQwen3Coder);
  coder_typed.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
       "o": {"type": "object"}, "s": {"type": "string"}}}}}])");
  return {
      {"plain text", Opts(ToolCallFormat::kHermes), "Hello <b>world</b> a < b", {"Hello <b>world</b> a < b", "", {}}},
      {"think then answer", Opts(ToolCallFormat::kHermes), "<think>\nLet me see.\n\n</think>\n\nThe answer is 4.",
       {"The answer is 4.", "Let me see.", {}}},
      {"starts in reasoning", Opts(ToolCallFormat::kHermes, true), "\nhmm\n</think>\n\nok", {"ok", "hmm", {}}},
      {"think keeps inner newlines", Opts(ToolCallFormat::kNone), "<think>a\n\nb\n</think>c\n", {"c\n", "a\n\nb", {}}},
      {"hermes two calls", Opts(ToolCallFormat::kHermes),
       "I'll check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>",
       {"I'll check.", "", {"call_0 get_weather {\"city\":\"Paris\",\"days\":2}", "call_1 run {\"cmd\":\"ls\"}"}}},
      {"hermes after thinking, string arguments", Opts(ToolCallFormat::kHermes),
       "<think>\nneed tool\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",
       {"", "need tool", {"call_0 f {\"a\":1}"}}},
      {"trailing newlines kept at the end", Opts(ToolCallFormat::kHermes), "a\n\nb\n\n", {"a\n\nb\n\n", "", {}}},
      {"newlines before a malformed block kept", Opts(ToolCallFormat::kHermes), "x\n<tool_call>bad</tool_call>\n",
       {"x\n<tool_call>bad</tool_call>\n", "", {}}},
      {"hermes malformed stays content", Opts(ToolCallFormat::kHermes), "x<tool_call>{not json}</tool_call>y",
       {"x<tool_call>{not json}</tool_call>y", "", {}}},
      {"hermes unfinished at the end", Opts(ToolCallFormat::kHermes), "a<tool_call>{\"name\": \"f\"",
       {"a<tool_call>{\"name\": \"f\"", "", {}}},
      {"near-markers are text", Opts(ToolCallFormat::kHermes), "<tool_cal <think <tool_call", {"<tool_cal <think <tool_call", "", {}}},
      {"qwen3-coder untyped", Opts(ToolCallFormat::kQwen3Coder),
       "Sure.\n<tool_call>\n<function=run>\n<parameter=cmd>\nls -la\n</parameter>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>",
       {"Sure.", "", {"call_0 run {\"cmd\":\"ls -la\",\"n\":\"5\"}"}}},
      {"qwen3-coder typed by schema", coder_typed,
       "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=x>\n2.5\n</parameter>\n<parameter=ok>\nTrue\n</parameter>\n"
       "<parameter=o>\n{\"k\": [1]}\n</parameter>\n<parameter=s>\nmulti\nline\n</parameter>\n</function>\n</tool_call>",
       {"", "", {"call_0 f {\"n\":42,\"x\":2.5,\"ok\":true,\"o\":{\"k\":[1]},\"s\":\"multi\\nline\"}"}}},
      {"qwen3-coder malformed", Opts(ToolCallFormat::kQwen3Coder), "<tool_call><function=f><parameter=a>1</function></tool_call>",
       {"<tool_call><function=f><parameter=a>1</function></tool_call>", "", {}}},
      {"deepseek two calls", Opts(ToolCallFormat::kDeepSeekV3),
       "Let me look." + ds_begin + call_begin + "function" + sep + "get_weather\n```json\n{\"city\": \"Oslo\"}\n```" + call_end + "\n" +
           call_begin + "function" + sep + "run\n```json\n{\"cmd\": \"ls\"}\n```" + call_end + ds_end,
       {"Let me look.", "", {"call_0 get_weather {\"city\":\"Oslo\"}", "call_1 run {\"cmd\":\"ls\"}"}}},
      {"deepseek malformed call", Opts(ToolCallFormat::kDeepSeekV3),
       ds_begin + call_begin + "function" + sep + "f\nno fence" + call_end + ds_end + "after",
       {ds_begin + call_begin + "function" + sep + "f\nno fence" + call_end + "after", "", {}}},
      {"deepseek markers as text for hermes", Opts(ToolCallFormat::kHermes), ds_begin + "x", {ds_begin + "x", "", {}}},
      {"no tool format", Opts(ToolCallFormat::kNone), "<tool_call>{\"name\": \"f\"}</tool_call>",
       {"<tool_call>{\"name\": \"f\"}</tool_call>", "", {}}},
  };
}

class ReplyParserTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReplyParserTest, SameResultForEverySplit) {
  const Case& c = GetParam();
  EXPECT_EQ(Parse(c.options, {c.text}), c.want) << "fed at once";
  for (size_t i = 0; i <= c.text.size(); ++i) {
    ASSERT_EQ(Parse(c.options, {c.text.substr(0, i), c.text.substr(i)}), c.want) << "split at byte " << i;
  }
  std::vector<std::string> bytes;
  for (char ch : c.text) bytes.emplace_back(1, ch);
  EXPECT_EQ(Parse(c.options, bytes), c.want) << "one byte at a time";
}

INSTANTIATE_TEST_SUITE_P(Families, ReplyParserTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n;
                           for (char ch : info.param.name) n.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
                           return n;
                         });

TEST(ReplyParserStreamTest, NothingPartialIsEmittedBeforeTheMarkerIsDecided) {
  ReplyParser p(Opts(ToolCallFormat::kHermes));
  ReplyDelta d = p.Feed("Hi <tool");
  EXPECT_EQ(d.content, "Hi ");
  d = p.Feed("_call>{\"name\": \"f\", \"arguments\": {}}</tool_");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.Feed("call> done");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments_json, "{}");
  EXPECT_EQ(d.content, "done");
  d = p.Feed(" <thi");
  EXPECT_EQ(d.content, " ");
  d = p.Finish();
  EXPECT_EQ(d.content, "<thi");
}

TEST(ReplyParserStreamTest, ReasoningNewlinesBeforeTheCloseAreHeldBack) {
  ReplyParser p(Opts(ToolCallFormat::kNone));
  EXPECT_EQ(p.Feed("<think>\nab\n").reasoning, "ab");
  EXPECT_EQ(p.Feed("\ncd").reasoning, "\n\ncd");
  ReplyDelta d = p.Feed("\n</think>\n\nanswer");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "answer");
}

TEST(DetectToolCallFormatTest, FromTheTemplateText) {
  EXPECT_EQ(DetectToolCallFormat("{{'<｜tool▁calls▁begin｜>'}}"), ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n<function={{ name }}>"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n{\"name\": ...}"), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{ bos_token }}{{ m.content }}"), ToolCallFormat::kNone);
}

}  // namespace
}  // namespace flotilla::inference
