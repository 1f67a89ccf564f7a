#include "flotilla/worker/trajectory_store.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "testing/temp_dir.h"

namespace flotilla::worker {
namespace {

v1::Trajectory Make(const std::string& id, const std::string& exp, const std::string& task,
                    v1::TrajectoryStatus status) {
  v1::Trajectory t;
  t.set_id(id);
  t.set_experiment(exp);
  t.set_task(task);
  t.set_status(status);
  t.set_reward(status == v1::OK ? 1.0 : 0.0);
  auto* turn = t.add_segments()->add_turns();
  turn->set_role(v1::Turn::ASSISTANT);
  turn->mutable_tokens()->add_ids(65);
  turn->mutable_tokens()->add_loss_mask(1);
  turn->mutable_tokens()->add_logprobs(-0.25f);
  return t;
}

TrajectoryQuery Q(std::string exp, std::string task = "",
                  std::optional<v1::TrajectoryStatus> status = std::nullopt) {
  TrajectoryQuery q;
  q.experiment = std::move(exp);
  q.task = std::move(task);
  q.status = status;
  return q;
}

TEST(TrajectoryStoreTest, PutGetQueryAndReplace) {
  flotilla::testing::TempDir dir;
  auto store = TrajectoryStore::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put(Make("a", "e1", "t1", v1::OK)).ok());
  ASSERT_TRUE((*store)->Put(Make("b", "e1", "t2", v1::FAILED)).ok());
  ASSERT_TRUE((*store)->Put(Make("c", "e2", "t1", v1::OK)).ok());
  EXPECT_EQ(*(*store)->Count({}), 3);
  EXPECT_EQ(*(*store)->Count(Q("e1")), 2);
  EXPECT_EQ(*(*store)->Count(Q("", "t1")), 2);
  EXPECT_EQ(*(*store)->Count(Q("e1", "", v1::OK)), 1);
  // Put with an existing id replaces (a session saved after every turn).
  ASSERT_TRUE((*store)->Put(Make("b", "e1", "t2", v1::OK)).ok());
  EXPECT_EQ(*(*store)->Count({}), 3);
  EXPECT_EQ(*(*store)->Count(Q("", "", v1::FAILED)), 0);
  auto got = (*store)->Get("b");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status(), v1::OK);
  EXPECT_EQ(got->segments(0).turns(0).tokens().logprobs(0), -0.25f);
  EXPECT_EQ((*store)->Get("zz").status().code(), absl::StatusCode::kNotFound);
  std::vector<std::string> order;
  ASSERT_TRUE((*store)->ForEach(Q("e1"), [&](const v1::Trajectory& t) {
    order.push_back(t.id());
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*(*store)->Count({}), 3);
}

TEST(TrajectoryStoreTest, SurvivesReopenAndExportsJsonLines) {
  flotilla::testing::TempDir dir;
  {
    auto store = TrajectoryStore::Open(dir.file("t.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(Make("a", "e1", "t1", v1::OK)).ok());
  }
  auto store = TrajectoryStore::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok());
  auto t = (*store)->Get("a");
  ASSERT_TRUE(t.ok());
  auto line = TrajectoryToJsonLine(*t);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(*line);
  EXPECT_EQ(j["id"], "a");
  EXPECT_EQ(j["status"], "OK");
  EXPECT_EQ(j["segments"][0]["turns"][0]["tokens"]["ids"][0], 65);
  EXPECT_EQ(j["segments"][0]["turns"][0]["tokens"]["loss_mask"][0], 1);
}

TEST(TrajectoryStoreTest, RejectsEmptyId) {
  flotilla::testing::TempDir dir;
  auto store = TrajectoryStore::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Put(v1::Trajectory()).code(), absl::StatusCode::kInvalidArgument);
}

// RL groups share the store with sessions: written whole, consumed per experiment, with the
// experiment's state set in the consuming transaction, and all of it survives a reopen.
TEST(TrajectoryStoreTest, GroupsConsumptionAndStatePerExperiment) {
  flotilla::testing::TempDir dir;
  auto grouped = [](const std::string& id, const std::string& exp, const std::string& group) {
    v1::Trajectory t = Make(id, exp, "t", v1::OK);
    t.set_group_id(group);
    t.set_dataset("arith");
    return t;
  };
  {
    auto store = TrajectoryStore::Open(dir.file("t.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(Make("session", "up", "chat", v1::OK)).ok());
    ASSERT_TRUE((*store)->PutAll({grouped("a/s0", "a", "g0"), grouped("a/s1", "a", "g0")}).ok());
    ASSERT_TRUE((*store)->PutAll({grouped("a/s2", "a", "g1")}).ok());
    ASSERT_TRUE((*store)->PutAll({grouped("b/s0", "b", "g0")}).ok());
    ASSERT_TRUE((*store)->MarkConsumed("a", {"g0"}, {{"step", "1"}}).ok());
    ASSERT_TRUE((*store)->SetState("a", {{"policy_version", "3"}}).ok());
    // One bad record fails the whole group: nothing of it is stored.
    EXPECT_EQ((*store)->PutAll({grouped("a/s3", "a", "g2"), v1::Trajectory()}).code(),
              absl::StatusCode::kInvalidArgument);
  }
  auto store = TrajectoryStore::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->UnconsumedGroups("a"), std::vector<std::string>{"g1"});
  EXPECT_EQ(*(*store)->UnconsumedGroups("b"), std::vector<std::string>{"g0"});
  EXPECT_EQ(*(*store)->UnconsumedGroups("up"), std::vector<std::string>{});
  EXPECT_EQ(*(*store)->GetState("a", "step", "0"), "1");
  EXPECT_EQ(*(*store)->GetState("a", "policy_version", "0"), "3");
  EXPECT_EQ(*(*store)->GetState("b", "step", "0"), "0");
  TrajectoryQuery q;
  q.experiment = "a";
  q.group_id = "g0";
  EXPECT_EQ(*(*store)->Count(q), 2);
  q.group_id = "";
  q.consumed = false;
  EXPECT_EQ(*(*store)->Count(q), 1);
  EXPECT_EQ(*(*store)->Count(TrajectoryQuery{}), 5);
  EXPECT_EQ((*store)->Get("a/s3").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace flotilla::worker

namespace flotilla::worker {
namespace {

TEST(TrajectoryStoreTest, NewestComesNewestFirstWithinItsQuery) {
  flotilla::testing::TempDir dir;
  auto store = TrajectoryStore::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_TRUE((*store)->Put(Make(id, std::string(id) == "c" ? "e2" : "e1", "t", v1::OK)).ok());
  }
  auto newest = (*store)->Newest({}, 2);
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_EQ(newest->size(), 2u);
  EXPECT_EQ((*newest)[0].id(), "d");
  EXPECT_EQ((*newest)[1].id(), "c");
  TrajectoryQuery only_e1;
  only_e1.experiment = "e1";
  auto e1 = (*store)->Newest(only_e1, 10);
  ASSERT_TRUE(e1.ok());
  ASSERT_EQ(e1->size(), 3u);
  EXPECT_EQ((*e1)[2].id(), "a");
  EXPECT_EQ((*store)->Newest({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::worker
