// RolloutController dispatch order and bounds on a FakeClock: in-flight, per-dataset, eta,
// mixture, sample-level dispatch, length-bias holds, suspension and reconfiguration.
#include "flotilla/trainer_bridge/rollout_controller.h"

#include "gtest/gtest.h"

namespace flotilla::trainer_bridge {
namespace {

RolloutConfig Rollout(uint32_t group, uint32_t in_flight, uint32_t eta, uint32_t per_step) {
  RolloutConfig r;
  r.group_size = group;
  r.max_in_flight = in_flight;
  r.staleness = eta;
  r.groups_per_step = per_step;
  r.length_bias.enabled = false;
  return r;
}

std::vector<DatasetConfig> Datasets(std::vector<std::tuple<std::string, double, uint32_t>> spec) {
  std::vector<DatasetConfig> out;
  for (auto& [n, w, m] : spec) out.push_back(DatasetConfig{n, "builtin:arith", n, w, m});
  return out;
}

void FinishGroup(RolloutController& c, const GroupTicket& t, uint32_t len) {
  for (uint32_t i = 0; i < t.size; ++i) ASSERT_TRUE(c.OnSampleFinished(t.first_sample + i, len).ok());
}

TEST(RolloutControllerTest, InFlightBoundAndSampleLevelDispatch) {
  FakeClock clock;
  RolloutController c(Rollout(4, 10, 100, 1), Datasets({{"a", 1, 0}}), {}, clock);
  auto first = c.Dispatch();
  ASSERT_EQ(first.size(), 2u);  // 2 groups of 4 fit under 10; a third would make 12
  EXPECT_EQ(first[0].first_sample, 0u);
  EXPECT_EQ(first[1].first_sample, 4u);
  EXPECT_EQ(c.Stats().in_flight, 8u);
  EXPECT_TRUE(c.Dispatch().empty());
  // One sample of group 0 finishes: in flight 7, 7 + 4 > 10.
  ASSERT_TRUE(c.OnSampleFinished(0, 5).ok());
  EXPECT_TRUE(c.Dispatch().empty());
  // One of group 1 finishes: two completions from two different groups free a group's slots.
  ASSERT_TRUE(c.OnSampleFinished(5, 5).ok());
  auto next = c.Dispatch();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].group, 2u);
  EXPECT_EQ(next[0].first_sample, 8u);
  EXPECT_EQ(c.Stats().in_flight, 10u);
}

TEST(RolloutControllerTest, UnknownAndDoubleFinishAreErrors) {
  FakeClock clock;
  RolloutController c(Rollout(2, 4, 4, 1), Datasets({{"a", 1, 0}}), {}, clock);
  ASSERT_EQ(c.Dispatch().size(), 2u);
  EXPECT_EQ(c.OnSampleFinished(99, 1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(c.OnSampleFinished(0, 1).ok());
  EXPECT_EQ(c.OnSampleFinished(0, 1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RolloutControllerTest, StalenessBoundWaitsForNewVersions) {
  FakeClock clock;
  // eta = 1, 2 groups per step: dispatch proceeds while group index < (version + 2) * 2.
  RolloutController c(Rollout(1, 100, 1, 2), Datasets({{"a", 1, 0}}), {}, clock);
  EXPECT_EQ(c.Dispatch().size(), 4u);
  EXPECT_TRUE(c.Dispatch().empty());
  c.SetPolicyVersion(1);
  auto more = c.Dispatch();
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0].group, 4u);
  EXPECT_EQ(more[0].dispatch_version, 1);
  c.SetPolicyVersion(0);  // versions never go back
  EXPECT_TRUE(c.Dispatch().empty());
  EXPECT_EQ(c.Stats().policy_version, 1);
}

TEST(RolloutControllerTest, SynchronousWhenEtaIsZero) {
  FakeClock clock;
  RolloutController c(Rollout(2, 100, 0, 3), Datasets({{"a", 1, 0}}), {}, clock);
  EXPECT_EQ(c.Dispatch().size(), 3u);  // exactly one step's groups
  EXPECT_TRUE(c.Dispatch().empty());
}

TEST(RolloutControllerTest, PerDatasetBoundAndMixture) {
  FakeClock clock;
  // b is capped at 4 samples (one group of 4); a has weight 3.
  RolloutController c(Rollout(4, 40, 100, 1), Datasets({{"a", 3, 0}, {"b", 1, 4}}), {}, clock);
  auto t = c.Dispatch();
  ASSERT_EQ(t.size(), 10u);
  std::vector<std::string> order;
  for (auto& g : t) order.push_back(g.dataset);
  // Smooth weighted choice: a (1/3) < b (1/1); ...; b only once because of its bound.
  EXPECT_EQ(order, (std::vector<std::string>{"a", "a", "a", "b", "a", "a", "a", "a", "a", "a"}));
  EXPECT_EQ(c.Stats().in_flight_by_dataset.at("b"), 4u);
  // Finishing b's group lets b go again ahead of a (it is furthest below its share).
  FinishGroup(c, t[3], 3);
  auto again = c.Dispatch();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].dataset, "b");
}

TEST(RolloutControllerTest, ReconfigureChangesMixtureWithoutDraining) {
  FakeClock clock;
  RolloutController c(Rollout(1, 6, 100, 1), Datasets({{"a", 1, 0}, {"b", 1, 0}}), {}, clock);
  auto t = c.Dispatch();
  ASSERT_EQ(t.size(), 6u);
  // b gets weight 5 and a bound of 2; a keeps its samples in flight and they finish normally.
  ASSERT_TRUE(c.Reconfigure(Datasets({{"a", 1, 0}, {"b", 5, 2}})).ok());
  EXPECT_EQ(c.Stats().in_flight, 6u);
  for (auto& g : t) ASSERT_TRUE(c.OnSampleFinished(g.first_sample, 2).ok());
  auto next = c.Dispatch();
  ASSERT_EQ(next.size(), 6u);
  int b = 0;
  for (auto& g : next) b += g.dataset == "b";
  EXPECT_EQ(b, 2);  // the new per-dataset bound holds at once
  EXPECT_EQ(c.Reconfigure(Datasets({{"a", 0, 0}})).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Reconfigure({}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RolloutControllerTest, SuspendStopsDispatch) {
  FakeClock clock;
  RolloutController c(Rollout(2, 8, 4, 1), Datasets({{"a", 1, 0}}), {}, clock);
  c.SetSuspended(true);
  EXPECT_TRUE(c.Dispatch().empty());
  c.SetSuspended(false);
  EXPECT_EQ(c.Dispatch().size(), 4u);
}

TEST(RolloutControllerTest, EffortLevelsCycleWithinGroup) {
  FakeClock clock;
  RolloutController c(Rollout(4, 4, 4, 1), Datasets({{"a", 1, 0}}), {10, 90}, clock);
  auto t = c.Dispatch();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].efforts, (std::vector<uint32_t>{10, 90, 10, 90}));
}

TEST(RolloutControllerTest, LengthBiasHoldsEarlyShortSamples) {
  FakeClock clock;
  RolloutConfig r = Rollout(1, 100, 100, 1);
  r.length_bias = LengthBiasConfig{true, 1.0, 5000, 3};
  RolloutController c(r, Datasets({{"a", 1, 0}}), {}, clock);
  auto t = c.Dispatch();
  ASSERT_GE(t.size(), 5u);
  // Warm-up: three samples of length 100 finish after 1 s each, released at once.
  clock.AdvanceMillis(1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.OnSampleFinished(t[i].first_sample, 100).ok());
  EXPECT_EQ(c.TakeReadyGroups(10).size(), 3u);
  // A sample of length 25 that took 1 s would finish at 4 s at median length: held 3 s.
  ASSERT_TRUE(c.OnSampleFinished(t[3].first_sample, 25).ok());
  EXPECT_TRUE(c.TakeReadyGroups(10).empty());
  EXPECT_EQ(c.Stats().held, 1u);
  ASSERT_TRUE(c.NextReleaseNanos().has_value());
  EXPECT_EQ(*c.NextReleaseNanos(), 1'000'000'000 + 4'000'000'000);
  // A median-length sample is not held and overtakes it.
  ASSERT_TRUE(c.OnSampleFinished(t[4].first_sample, 100).ok());
  auto ready = c.TakeReadyGroups(10);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0], t[4].group);
  clock.AdvanceMillis(2999);
  EXPECT_TRUE(c.TakeReadyGroups(10).empty());
  clock.AdvanceMillis(1);
  ready = c.TakeReadyGroups(10);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0], t[3].group);
}

TEST(LengthBiasGateTest, HoldIsSmoothAndCapped) {
  LengthBiasGate gate(LengthBiasConfig{true, 0.5, 1000, 1});
  EXPECT_EQ(gate.OnFinished("d", 200, 0, 2'000'000'000), 2'000'000'000);  // no history: no hold
  // median 200, length 100, took 1 s: 1 s * (1 + 0.5 * (2 - 1)) = 1.5 s.
  EXPECT_EQ(gate.OnFinished("d", 100, 0, 1'000'000'000), 1'500'000'000);
  // median now 150 (100, 200); length 10 would be 1 s * (1 + 0.5 * 14) = 8 s: capped at +1 s.
  EXPECT_EQ(gate.OnFinished("d", 10, 0, 1'000'000'000), 2'000'000'000);
  EXPECT_DOUBLE_EQ(gate.Median("d"), 100.0);
}

TEST(RolloutControllerTest, RestoreCountersContinuesIndices) {
  FakeClock clock;
  RolloutController c(Rollout(2, 8, 1, 2), Datasets({{"a", 1, 0}}), {}, clock);
  c.SetPolicyVersion(3);
  c.RestoreCounters(9, {{"a", 9}});
  auto t = c.Dispatch();  // limit (3 + 1 + 1) * 2 = 10: only group 9 may go
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].group, 9u);
  EXPECT_EQ(t[0].first_sample, 18u);
}

TEST(RolloutControllerTest, GroupBudgetEndsDispatchAtTheRunsLastGroupUntilLifted) {
  FakeClock clock;
  // A restart after 10 groups: the budget counts from there.
  RolloutController c(Rollout(2, 100, 100, 1), Datasets({{"a", 1, 0}}), {}, clock);
  c.RestoreCounters(10, {});
  c.SetGroupBudget(3);
  auto first = c.Dispatch();
  ASSERT_EQ(first.size(), 3u);  // in-flight and eta allow 50; the run takes 3
  EXPECT_EQ(first[0].group, 10u);
  EXPECT_EQ(first[2].group, 12u);
  EXPECT_EQ(c.Stats().groups_outstanding, 3u);
  for (const auto& t : first) FinishGroup(c, t, 4);
  EXPECT_TRUE(c.Dispatch().empty());
  EXPECT_EQ(c.TakeReadyGroups(2).size(), 2u);
  EXPECT_EQ(c.Stats().groups_outstanding, 1u);
  EXPECT_TRUE(c.Dispatch().empty());
  // Lifting an unspent budget changes nothing; a spent one goes.
  RolloutController d(Rollout(2, 4, 100, 1), Datasets({{"a", 1, 0}}), {}, clock);
  d.SetGroupBudget(3);
  auto two = d.Dispatch();
  ASSERT_EQ(two.size(), 2u);  // the in-flight bound
  d.LiftSpentGroupBudget();
  FinishGroup(d, two[0], 4);
  auto third = d.Dispatch();
  ASSERT_EQ(third.size(), 1u);  // the third and last
  FinishGroup(d, two[1], 4);
  EXPECT_TRUE(d.Dispatch().empty());
  d.LiftSpentGroupBudget();
  EXPECT_EQ(d.Dispatch().size(), 1u);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
