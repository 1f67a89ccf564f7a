// `flotilla trajectories export --format sft|rl`: a trajectory's training records, exact ids
// and loss mask per segment, and none for rl from a trajectory recorded as text.
#include "flotilla/eval/training_records.h"
#include "gtest/gtest.h"

namespace flotilla::eval {
namespace {

using nlohmann::json;

v1::Turn Turn(v1::Turn::Role role, const std::string& text, std::vector<int32_t> ids, std::vector<uint32_t> mask) {
  v1::Turn t;
  t.set_role(role);
  t.set_text(text);
  for (size_t i = 0; i < ids.size(); ++i) {
    t.mutable_tokens()->add_ids(ids[i]);
    t.mutable_tokens()->add_loss_mask(mask[i]);
    t.mutable_tokens()->add_logprobs(mask[i] != 0 ? -0.5f : 0.0f);
    t.mutable_tokens()->add_policy_versions(mask[i] != 0 ? 3 : -1);
  }
  return t;
}

// Segment 0: user, a reply calling a tool, the tool's output; segment 1 (history rewritten):
// user only, no reply.
v1::Trajectory Sample() {
  v1::Trajectory t;
  t.set_id("sess-1");
  t.set_task("hello");
  t.set_scaffold("mini");
  t.set_group_id("g");
  t.set_effort(40);
  t.set_reward(1.0);
  t.set_status(v1::OK);
  v1::Segment* s = t.add_segments();
  *s->add_turns() = Turn(v1::Turn::USER, "hi", {1, 2}, {0, 0});
  v1::Turn reply = Turn(v1::Turn::ASSISTANT, "run", {3, 4, 5}, {0, 1, 1});
  v1::ToolCall* c = reply.add_tool_calls();
  c->set_id("c1");
  c->set_name("bash");
  c->set_arguments_json("{\"cmd\":\"ls\"}");
  *s->add_turns() = reply;
  v1::Turn tool = Turn(v1::Turn::TOOL, "a.txt", {6}, {0});
  tool.set_tool_call_id("c1");
  *s->add_turns() = tool;
  *t.add_segments()->add_turns() = Turn(v1::Turn::USER, "again", {7}, {0});
  return t;
}

TEST(TrainingRecordsTest, SftHasTheConversationAndItsExactIds) {
  std::vector<json> r = TrainingRecords(Sample(), TrainingFormat::kSft);
  ASSERT_EQ(r.size(), 1u);  // the second segment holds no reply
  EXPECT_EQ(r[0], json::parse(R"({"id":"sess-1","segment":0,"task":"hello","scaffold":"mini","reward":1.0,
    "status":"OK","messages":[{"role":"user","content":"hi"},
      {"role":"assistant","content":"run","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]},
      {"role":"tool","content":"a.txt","tool_call_id":"c1"}],
    "input_ids":[1,2,3,4,5,6],"loss_mask":[0,0,0,1,1,0]})"));
}

TEST(TrainingRecordsTest, RlIsPerTokenWithLogprobsAndVersions) {
  std::vector<json> r = TrainingRecords(Sample(), TrainingFormat::kRl);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["input_ids"], json::array({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r[0]["loss_mask"], json::array({0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(r[0]["logprobs"], json::array({0.0, 0.0, 0.0, -0.5, -0.5, 0.0}));
  EXPECT_EQ(r[0]["policy_versions"], json::array({-1, -1, -1, 3, 3, -1}));
  EXPECT_EQ(r[0]["group_id"], "g");
  EXPECT_EQ(r[0]["effort"], 40);
  EXPECT_EQ(r[1]["segment"], 1);
  EXPECT_EQ(r[1]["input_ids"], json::array({7}));
}

TEST(TrainingRecordsTest, TextOnlyTrajectoryGivesSftMessagesAndNoRlRecord) {
  v1::Trajectory t = Sample();
  for (v1::Segment& s : *t.mutable_segments()) {
    for (v1::Turn& turn : *s.mutable_turns()) turn.clear_tokens();
  }
  std::vector<json> sft = TrainingRecords(t, TrainingFormat::kSft);
  ASSERT_EQ(sft.size(), 1u);
  EXPECT_EQ(sft[0]["messages"].size(), 3u);
  EXPECT_FALSE(sft[0].contains("input_ids"));
  EXPECT_TRUE(TrainingRecords(t, TrainingFormat::kRl).empty());
  EXPECT_EQ(ParseTrainingFormat("dpo").status().message(), "--format dpo: unknown format (sft, rl)");
  EXPECT_EQ(*ParseTrainingFormat("rl"), TrainingFormat::kRl);
}

}  // namespace
}  // namespace flotilla::eval
