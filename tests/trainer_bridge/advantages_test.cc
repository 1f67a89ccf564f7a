// GRPO advantages and the effort length penalty against hand-computed values.
#include "flotilla/trainer_bridge/advantages.h"

#include <cmath>

#include "gtest/gtest.h"

namespace flotilla::trainer_bridge {
namespace {

TEST(AdvantagesTest, MeanCentredWithoutStd) {
  AdvantageOptions o;
  o.std_scaling = false;
  auto a = GroupAdvantages({{1, 0, 5}, {0, 0, 5}, {0, 0, 5}, {1, 0, 5}}, o);
  EXPECT_EQ(a, (std::vector<double>{0.5, -0.5, -0.5, 0.5}));
}

TEST(AdvantagesTest, StdScaledAndDegenerateGroups) {
  AdvantageOptions o;
  auto a = GroupAdvantages({{1, 0, 1}, {0, 0, 1}, {0, 0, 1}, {0, 0, 1}}, o);
  // mean 0.25, std sqrt(0.1875) = 0.4330127
  EXPECT_NEAR(a[0], 0.75 / std::sqrt(0.1875), 1e-12);
  EXPECT_NEAR(a[1], -0.25 / std::sqrt(0.1875), 1e-12);
  auto same = GroupAdvantages({{1, 0, 1}, {1, 0, 1}}, o);
  EXPECT_EQ(same, (std::vector<double>{0, 0}));
}

TEST(AdvantagesTest, LengthPenaltyHandComputed) {
  EffortConfig e;
  e.levels = {10, 50, 100};
  e.k0 = 0.5;
  e.tau = 20;
  e.c_max = 0.3;
  e.l_norm = 100;
  // k(10) = 0.5; r_len = -min(0.3, 0.5 * 40 / 100) = -0.2
  EXPECT_DOUBLE_EQ(LengthPenalty(e, 10, 40), -0.2);
  // capped: 0.5 * 200 / 100 = 1.0 -> -0.3
  EXPECT_DOUBLE_EQ(LengthPenalty(e, 10, 200), -0.3);
  // k(50) = 0.5 * exp(-2) = 0.0676676; l = 200 -> -0.1353353
  EXPECT_NEAR(LengthPenalty(e, 50, 200), -0.5 * std::exp(-2.0) * 2.0, 1e-12);
  EXPECT_DOUBLE_EQ(EffortPenaltyScale(e, 100), 0.5 * std::exp(-4.5));
  EXPECT_EQ(LengthPenalty(e, 0, 200), 0.0);
  EffortConfig off;
  EXPECT_EQ(LengthPenalty(off, 10, 200), 0.0);
}

TEST(AdvantagesTest, CentredWithinEffortSubgroups) {
  AdvantageOptions o;
  o.std_scaling = false;
  o.effort.levels = {10, 90};
  o.effort.k0 = 1.0;
  o.effort.tau = 40;
  o.effort.c_max = 10;
  o.effort.l_norm = 100;
  // Effort 10: k = 1. rewards 1, 1 with lengths 10, 30: R = 0.9, 0.7 -> +0.1, -0.1.
  // Effort 90: k = exp(-2). rewards 1, 0 with length 100: R = 1 - e^-2, -e^-2 -> +0.5, -0.5.
  auto a = GroupAdvantages({{1, 10, 10}, {1, 90, 100}, {1, 10, 30}, {0, 90, 100}}, o);
  EXPECT_NEAR(a[0], 0.1, 1e-12);
  EXPECT_NEAR(a[2], -0.1, 1e-12);
  EXPECT_NEAR(a[1], 0.5, 1e-12);
  EXPECT_NEAR(a[3], -0.5, 1e-12);
  EXPECT_EQ(EffortPromptLine(40), "effort: 40");
}

}  // namespace
}  // namespace flotilla::trainer_bridge
