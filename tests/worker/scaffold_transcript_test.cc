// Reference conversations of the built-in scaffolds: the exact turns mini and terminal record
// for a task's reference steps, the per-turn warm-start examples cut from them, the token mask,
// and errors that name the task and step.
#include "flotilla/worker/scaffold_transcript.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/worker/chat_service.h"

namespace flotilla::worker {
namespace {

using Role = ChatMessage::Role;

TerminalTask LookupLike() {
  TerminalTask t;
  t.name = "lookup:a=42";
  t.instruction = "Write the number in /app/data/a.txt to /app/answer.txt.";
  t.reference_steps = {{"cat /app/data/a.txt", "42\n", 0}, {"echo 42 > /app/answer.txt", "", 0}};
  return t;
}

ScaffoldOptions With(const std::string& scaffold) {
  ScaffoldOptions o;
  o.scaffold = scaffold;
  return o;
}

TEST(ScaffoldTranscriptTest, MiniRecordsOneBashBlockPerTurnAndSubmitsInTheLast) {
  auto opening = ScaffoldOpening(LookupLike(), With("mini"));
  ASSERT_TRUE(opening.ok()) << opening.status();
  auto c = ReferenceConversation(LookupLike(), With("mini"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 5u);
  EXPECT_EQ((*c)[0].role, Role::kSystem);
  EXPECT_EQ((*c)[0].content, opening->system);
  EXPECT_THAT((*c)[0].content, ::testing::StartsWith("You are a helpful assistant that can interact"));
  EXPECT_EQ((*c)[1].role, Role::kUser);
  EXPECT_EQ((*c)[1].content, "Please solve this task:\n\nWrite the number in /app/data/a.txt to /app/answer.txt.");
  EXPECT_EQ((*c)[2].role, Role::kAssistant);
  EXPECT_EQ((*c)[2].content, "```bash\ncat /app/data/a.txt\n```");
  EXPECT_EQ((*c)[3].role, Role::kUser);
  EXPECT_EQ((*c)[3].content, "<returncode>0</returncode>\n<output>\n42\n</output>");
  EXPECT_EQ((*c)[4].role, Role::kAssistant);
  EXPECT_EQ((*c)[4].content,
            "```bash\necho 42 > /app/answer.txt && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```");
  // The scaffold's own parser reads the reference replies as the intended commands.
  EXPECT_EQ(ParseMiniAction((*c)[2].content).command, "cat /app/data/a.txt");
  EXPECT_EQ(ParseMiniAction((*c)[4].content).command,
            "echo 42 > /app/answer.txt && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT");
}

TEST(ScaffoldTranscriptTest, TerminalCallsBashThenBashAndSubmit) {
  auto c = ReferenceConversation(LookupLike(), With("terminal"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 5u);
  auto opening = ScaffoldOpening(LookupLike(), With("terminal"));
  ASSERT_TRUE(opening.ok());
  EXPECT_EQ((*c)[0].content, opening->system + "\n\n" + RenderToolsBlock(opening->tools));
  EXPECT_EQ((*c)[1].content, "Write the number in /app/data/a.txt to /app/answer.txt.");
  ASSERT_EQ((*c)[2].tool_calls.size(), 1u);
  EXPECT_EQ((*c)[2].content, "");
  EXPECT_EQ((*c)[2].tool_calls[0].name, "bash");
  EXPECT_EQ((*c)[2].tool_calls[0].arguments_json, R"({"command":"cat /app/data/a.txt"})");
  EXPECT_EQ((*c)[3].role, Role::kTool);
  EXPECT_EQ((*c)[3].tool_call_id, "call_0");
  EXPECT_EQ((*c)[3].content, "<returncode>0</returncode>\n<output>\n42\n</output>");
  ASSERT_EQ((*c)[4].tool_calls.size(), 2u);
  EXPECT_EQ((*c)[4].tool_calls[0].arguments_json, R"({"command":"echo 42 > /app/answer.txt"})");
  EXPECT_EQ((*c)[4].tool_calls[1].name, "submit");
  EXPECT_EQ((*c)[4].tool_calls[1].arguments_json, "{}");
  // What the model is taught to generate parses back into the same calls.
  std::vector<int32_t> turn = inference::RenderMessage((*c)[4]);
  inference::ParsedReply parsed = inference::ParseAssistantReply({turn.begin() + 1, turn.end() - 1});
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.text, "");
  EXPECT_EQ(parsed.tool_calls[0].arguments_json, (*c)[4].tool_calls[0].arguments_json);
  EXPECT_EQ(parsed.tool_calls[1].name, "submit");
}

TEST(ScaffoldTranscriptTest, TurnExamplesAndMaskCoverExactlyTheAssistantTurns) {
  for (const char* scaffold : {"mini", "terminal"}) {
    SCOPED_TRACE(scaffold);
    auto c = ReferenceConversation(LookupLike(), With(scaffold));
    auto ex = ReferenceTurnExamples(LookupLike(), With(scaffold));
    auto all = ReferenceTrajectoryTokens(LookupLike(), With(scaffold));
    ASSERT_TRUE(c.ok() && ex.ok() && all.ok());
    ASSERT_EQ(ex->size(), 2u);
    // The first prompt is the conversation before the first reply, ready for generation.
    EXPECT_EQ((*ex)[0].prompt, inference::RenderConversation({(*c)[0], (*c)[1]}, true));
    for (size_t i = 0; i < 2; ++i) {
      std::vector<int32_t> turn = inference::RenderMessage((*c)[2 + 2 * i]);
      EXPECT_EQ((*ex)[i].target, std::vector<int32_t>(turn.begin() + 1, turn.end()));
      EXPECT_EQ((*ex)[i].target.back(), inference::kEndTurn);
    }
    // The last example's prompt and target are the whole trajectory.
    std::vector<int32_t> whole = (*ex)[1].prompt;
    whole.insert(whole.end(), (*ex)[1].target.begin(), (*ex)[1].target.end());
    EXPECT_EQ(all->tokens, whole);
    ASSERT_EQ(all->generated.size(), all->tokens.size());
    size_t masked = 0;
    for (uint8_t g : all->generated) masked += g;
    EXPECT_EQ(masked, (*ex)[0].target.size() + (*ex)[1].target.size());
    EXPECT_EQ(all->generated.back(), 1);
    EXPECT_EQ(all->generated[(*ex)[1].prompt.size() - 1], 0);  // the <assistant> role token
    EXPECT_EQ(all->generated[(*ex)[1].prompt.size()], 1);
  }
}

TEST(ScaffoldTranscriptTest, EpisodeSizesInTokens) {
  // What a small model's context must hold (mini's system text is 522 bytes of it).
  auto mini = ReferenceTurnExamples(LookupLike(), With("mini"));
  auto terminal = ReferenceTurnExamples(LookupLike(), With("terminal"));
  ASSERT_TRUE(mini.ok() && terminal.ok());
  // prompt before each reply (ending in <assistant>), and each reply through <end>
  EXPECT_EQ((*mini)[0].prompt.size(), 608u);
  EXPECT_EQ((*mini)[0].target.size(), 32u);
  EXPECT_EQ((*mini)[1].prompt.size(), 691u);
  EXPECT_EQ((*mini)[1].target.size(), 84u);
  EXPECT_EQ((*terminal)[0].prompt.size(), 668u);
  EXPECT_EQ((*terminal)[0].target.size(), 67u);
  EXPECT_EQ((*terminal)[1].prompt.size(), 786u);
  EXPECT_EQ((*terminal)[1].target.size(), 110u);
}

TEST(ScaffoldTranscriptTest, AnExperimentsSystemPromptGoesBeforeTheScaffolds) {
  auto own = ScaffoldOpening(LookupLike(), With("mini"));
  ScaffoldOptions mini = With("mini");
  mini.system_prompt = "Be brief.";
  auto c = ReferenceConversation(LookupLike(), mini);
  ASSERT_TRUE(own.ok() && c.ok());
  EXPECT_EQ((*c)[0].content, "Be brief.\n\n" + own->system);
  ScaffoldOptions terminal = With("terminal");
  terminal.system_prompt = "Use the tools.";
  auto opening = ScaffoldOpening(LookupLike(), terminal);
  auto plain = ScaffoldOpening(LookupLike(), With("terminal"));
  ASSERT_TRUE(opening.ok() && plain.ok());
  EXPECT_EQ(opening->system, "Use the tools.\n\n" + plain->system);
  auto t = ReferenceConversation(LookupLike(), terminal);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].content, opening->system + "\n\n" + RenderToolsBlock(opening->tools));
  EXPECT_EQ(opening->tools.size(), 2u);
}

TEST(ScaffoldTranscriptTest, TemplatesReplaceTheScaffoldsOwnTexts) {
  ScaffoldOptions mini = With("mini");
  mini.system_template = "One ```bash block per reply.";
  mini.instance_template = "Task: {{task}} ({{task}})";
  auto c = ReferenceConversation(LookupLike(), mini);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)[0].content, "One ```bash block per reply.");
  EXPECT_EQ((*c)[1].content,
            "Task: Write the number in /app/data/a.txt to /app/answer.txt. (Write the number in /app/data/a.txt to "
            "/app/answer.txt.)");
  // The replies and observations are the scaffold's protocol, not its text: unchanged.
  auto own = ReferenceConversation(LookupLike(), With("mini"));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ((*own)[1].content, "Please solve this task:\n\nWrite the number in /app/data/a.txt to /app/answer.txt.");
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ((*c)[i].content, (*own)[i].content);
  // An experiment's system_prompt still goes first; terminal keeps its tools.
  mini.system_prompt = "Be brief.";
  auto opening = ScaffoldOpening(LookupLike(), mini);
  ASSERT_TRUE(opening.ok());
  EXPECT_EQ(opening->system, "Be brief.\n\nOne ```bash block per reply.");
  ScaffoldOptions terminal = With("terminal");
  terminal.system_template = "Use bash, then submit.";
  auto t = ScaffoldOpening(LookupLike(), terminal);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->system, "Use bash, then submit.");
  EXPECT_EQ(t->messages[0].content, "Write the number in /app/data/a.txt to /app/answer.txt.");
  EXPECT_EQ(t->tools.size(), 2u);
  // The instruction must have a place.
  mini.instance_template = "Solve it.";
  auto bad = ScaffoldOpening(LookupLike(), mini);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "instance_template: must contain {{task}}");
}

TEST(ScaffoldTranscriptTest, LongOutputsAreCutAsTheScaffoldCutsThem) {
  TerminalTask t = LookupLike();
  t.reference_steps[0].output = std::string(30, 'x');
  ScaffoldOptions o = With("mini");
  o.output_limit_bytes = 10;
  auto c = ReferenceConversation(t, o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[3].content,
            "<returncode>0</returncode>\n<output>\nxxxxx\n[... 20 bytes elided ...]\nxxxxx</output>");
}

TEST(ScaffoldTranscriptTest, ErrorsNameTheTaskAndStep) {
  TerminalTask none = LookupLike();
  none.reference_steps.clear();
  auto a = ReferenceTurnExamples(none, With("mini"));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a.status().message(), "task lookup:a=42: no reference steps");

  TerminalTask fenced = LookupLike();
  fenced.reference_steps[1].command = "echo ```";
  auto b = ReferenceConversation(fenced, With("terminal"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "task lookup:a=42: reference_steps[1].command: must be non-empty and hold no ```");

  auto c = ReferenceTrajectoryTokens(LookupLike(), With("single-turn"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "scaffold: unknown 'single-turn' (built in: mini, terminal)");
}

}  // namespace
}  // namespace flotilla::worker
