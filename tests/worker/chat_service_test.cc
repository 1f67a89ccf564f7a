#include "flotilla/worker/chat_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/tokenizer.h"
#include "scripted_generator.h"

namespace flotilla::worker {
namespace {

using inference::Encode;
using inference::kAssistant;
using inference::kBos;
using inference::kEndTurn;
using inference::kToolCallBegin;
using inference::kToolCallEnd;
using testing::ScriptedGenerator;

std::vector<int32_t> ToolCallReply(const std::string& text, const std::string& call_json) {
  std::vector<int32_t> t = Encode(text);
  t.push_back(kToolCallBegin);
  for (int32_t x : Encode(call_json)) t.push_back(x);
  t.push_back(kToolCallEnd);
  t.push_back(kEndTurn);
  return t;
}

ChatMessage Msg(ChatMessage::Role role, std::string content) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

class ChatServiceTest : public ::testing::Test {
 protected:
  ChatServiceTest() : service_(&gen_, Options()) {}
  static ChatServiceOptions Options() {
    ChatServiceOptions o;
    o.experts_per_token = ScriptedGenerator::kWidth;
    return o;
  }
  ChatRequest Request(std::vector<ChatMessage> messages) {
    ChatRequest r;
    r.system = "be brief";
    r.messages = std::move(messages);
    r.tools.push_back({"bash", "run a command", R"({"type":"object"})"});
    r.seed = 1;
    return r;
  }
  ScriptedGenerator gen_;
  ChatService service_;
};

TEST_F(ChatServiceTest, ExtendsOneSequenceAndNeverRetokenizes) {
  gen_.AddReply(ToolCallReply("ok", R"({"name": "bash", "arguments": {"cmd": "ls", "n": 1}})"));
  gen_.AddTextReply("done");
  std::vector<ChatMessage> conv = {Msg(ChatMessage::Role::kUser, "list files")};
  auto r1 = service_.Complete(Request(conv), nullptr);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->text, "ok");
  ASSERT_EQ(r1->tool_calls.size(), 1u);
  EXPECT_EQ(r1->tool_calls[0].name, "bash");
  EXPECT_EQ(r1->stop, StopKind::kToolCalls);
  EXPECT_EQ(r1->reused_tokens, 0u);

  // The client re-sends the reply with its arguments re-serialized in another key order.
  ChatMessage echoed = Msg(ChatMessage::Role::kAssistant, "ok\n");
  echoed.tool_calls.push_back({r1->tool_calls[0].id, "bash", R"({"n":1,"cmd":"ls"})"});
  ChatMessage result = Msg(ChatMessage::Role::kTool, "a.txt\nb.txt");
  result.tool_call_id = r1->tool_calls[0].id;
  conv.push_back(echoed);
  conv.push_back(result);
  auto r2 = service_.Complete(Request(conv), nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->session_id, r1->session_id);
  EXPECT_EQ(r2->text, "done");
  EXPECT_EQ(r2->reused_tokens, r1->prompt_tokens + r1->completion_tokens);

  auto calls = gen_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].sequence_id, "seq-0");
  std::vector<int32_t> expected_new = inference::RenderMessage(result);
  expected_new.push_back(kAssistant);
  EXPECT_EQ(calls[1].new_tokens, expected_new);

  auto traj = service_.Trajectory(r1->session_id);
  ASSERT_TRUE(traj.ok());
  ASSERT_EQ(traj->segments_size(), 1);
  EXPECT_EQ(traj->segments(0).reason(), "start");
  std::vector<int32_t> ids;
  std::vector<uint32_t> mask;
  std::vector<float> logprobs;
  std::vector<int32_t> experts;
  for (const auto& turn : traj->segments(0).turns()) {
    ids.insert(ids.end(), turn.tokens().ids().begin(), turn.tokens().ids().end());
    mask.insert(mask.end(), turn.tokens().loss_mask().begin(), turn.tokens().loss_mask().end());
    logprobs.insert(logprobs.end(), turn.tokens().logprobs().begin(), turn.tokens().logprobs().end());
    experts.insert(experts.end(), turn.tokens().experts().begin(), turn.tokens().experts().end());
  }
  EXPECT_EQ(ids, gen_.sequence("seq-0"));
  EXPECT_EQ(ids.front(), kBos);
  size_t generated = 0, expert_row = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto want = ScriptedGenerator::RecordFor(i, ids[i]);
    if (mask[i] == 1) {
      ++generated;
      EXPECT_FLOAT_EQ(logprobs[i], want.logprob) << i;
      std::vector<int32_t> row(experts.begin() + expert_row * 4, experts.begin() + expert_row * 4 + 4);
      EXPECT_EQ(row, want.experts) << i;
      ++expert_row;
    } else {
      EXPECT_EQ(logprobs[i], 0.0f);
    }
  }
  EXPECT_EQ(generated, r1->completion_tokens + r2->completion_tokens);
  EXPECT_EQ(experts.size(), generated * 4);
}

TEST_F(ChatServiceTest, RewrittenHistoryOpensSegmentReusingSharedTurns) {
  gen_.AddTextReply("one");
  gen_.AddTextReply("two");
  gen_.AddTextReply("three");
  std::vector<ChatMessage> conv = {Msg(ChatMessage::Role::kUser, "hi")};
  auto r1 = service_.Complete(Request(conv), nullptr);
  ASSERT_TRUE(r1.ok());
  conv.push_back(Msg(ChatMessage::Role::kAssistant, "one"));
  conv.push_back(Msg(ChatMessage::Role::kUser, "more"));
  ChatRequest req = Request(conv);
  req.session_id = r1->session_id;
  ASSERT_TRUE(service_.Complete(req, nullptr).ok());
  // Compaction: the scaffold replaces the exchange with a summary.
  ChatRequest compacted = Request({Msg(ChatMessage::Role::kUser, "hi"),
                                   Msg(ChatMessage::Role::kUser, "summary: said one")});
  compacted.session_id = r1->session_id;
  ASSERT_TRUE(service_.Complete(compacted, nullptr).ok());
  auto traj = service_.Trajectory(r1->session_id);
  ASSERT_TRUE(traj.ok());
  ASSERT_EQ(traj->segments_size(), 2);
  EXPECT_EQ(traj->segments(1).reason(), "history-rewritten");
  // The shared system and user turns keep their recorded ids; the new segment is one engine
  // sequence of its own.
  const auto& s0 = traj->segments(0).turns();
  const auto& s1 = traj->segments(1).turns();
  ASSERT_GE(s1.size(), 3);
  EXPECT_THAT(s1[0].tokens().ids(), ::testing::ElementsAreArray(s0[0].tokens().ids()));
  EXPECT_THAT(s1[1].tokens().ids(), ::testing::ElementsAreArray(s0[1].tokens().ids()));
  auto calls = gen_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].sequence_id, "");
  std::vector<int32_t> seg1;
  for (const auto& t : s1) seg1.insert(seg1.end(), t.tokens().ids().begin(), t.tokens().ids().end());
  EXPECT_EQ(seg1, gen_.sequence("seq-1"));

  ChatRequest truncated = Request({Msg(ChatMessage::Role::kUser, "hi")});
  truncated.session_id = r1->session_id;
  ASSERT_TRUE(service_.Complete(truncated, nullptr).ok());
  traj = service_.Trajectory(r1->session_id);
  ASSERT_EQ(traj->segments_size(), 3);
  EXPECT_EQ(traj->segments(2).reason(), "history-truncated");
}

TEST_F(ChatServiceTest, LostEngineSequenceIsPrefilledFromTheRecord) {
  gen_.AddTextReply("a");
  gen_.AddTextReply("b");
  std::vector<ChatMessage> conv = {Msg(ChatMessage::Role::kUser, "x")};
  auto r1 = service_.Complete(Request(conv), nullptr);
  ASSERT_TRUE(r1.ok());
  gen_.DropAllSequences();
  conv.push_back(Msg(ChatMessage::Role::kAssistant, "a"));
  conv.push_back(Msg(ChatMessage::Role::kUser, "y"));
  auto r2 = service_.Complete(Request(conv), nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status();
  auto calls = gen_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].sequence_id, "seq-0");  // refused: NotFound
  EXPECT_EQ(calls[2].sequence_id, "");
  auto traj = service_.Trajectory(r1->session_id);
  ASSERT_EQ(traj->segments_size(), 1);
  std::vector<int32_t> ids;
  for (const auto& t : traj->segments(0).turns()) ids.insert(ids.end(), t.tokens().ids().begin(), t.tokens().ids().end());
  EXPECT_EQ(ids, gen_.sequence("seq-1"));
}

TEST_F(ChatServiceTest, MalformedToolCallBecomesText) {
  gen_.AddReply(ToolCallReply("x", R"({"name": "bash", "arguments": [1, 2]})"));
  auto r = service_.Complete(Request({Msg(ChatMessage::Role::kUser, "go")}), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->tool_calls.empty());
  EXPECT_THAT(r->text, ::testing::HasSubstr("arguments"));
  EXPECT_EQ(r->stop, StopKind::kEndTurn);
}

TEST_F(ChatServiceTest, InvalidUtf8IsReplacedOnTheWire) {
  gen_.AddReply({'a', 0xff, 'b', 0xe2, 0x82, kEndTurn});
  auto r = service_.Complete(Request({Msg(ChatMessage::Role::kUser, "go")}), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(ChatServiceTest, ContextOverflowIsInvalidArgument) {
  gen_.set_context_limit(20);
  auto r = service_.Complete(Request({Msg(ChatMessage::Role::kUser, std::string(100, 'x'))}), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("context window of 20 tokens"));
}

TEST_F(ChatServiceTest, LengthStopClosesTheTurnWithAnUntrainedEnd) {
  gen_.AddReply({'a', 'b', 'c', 'd'});
  ChatRequest req = Request({Msg(ChatMessage::Role::kUser, "go")});
  req.max_tokens = 2;
  auto r = service_.Complete(req, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, StopKind::kMaxTokens);
  EXPECT_EQ(r->text, "ab");
  auto traj = service_.Trajectory(r->session_id);
  const auto& last = traj->segments(0).turns().rbegin()->tokens();
  ASSERT_EQ(last.ids_size(), 4);  // <assistant> a b <end>
  EXPECT_EQ(last.ids(3), kEndTurn);
  EXPECT_EQ(last.loss_mask(3), 0u);
  EXPECT_EQ(last.loss_mask(1), 1u);
}

TEST(Utf8Test, CompletePrefixHoldsBackAnUnfinishedSequence) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xFF"), 2u);
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace flotilla::worker
