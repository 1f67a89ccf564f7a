#include "flotilla/worker/pass_at_k.h"

#include "gtest/gtest.h"

namespace flotilla::worker {
namespace {

TEST(PassAtKTest, MatchesTheClosedFormOnSmallCases) {
  struct Case {
    int n, c, k;
    double want;
  } cases[] = {
      {3, 0, 1, 0.0},     {3, 3, 1, 1.0},       {3, 1, 1, 1.0 / 3}, {3, 1, 3, 1.0},
      {3, 1, 2, 2.0 / 3},  // 1 - C(2,2)/C(3,2) = 1 - 1/3
      {5, 2, 2, 0.7},      // 1 - C(3,2)/C(5,2) = 1 - 3/10
      {10, 0, 5, 0.0},    {4, 3, 2, 1.0},       {0, 0, 1, 0.0},     {3, 1, 4, 0.0},
  };
  for (const Case& c : cases) EXPECT_NEAR(PassAtK(c.n, c.c, c.k), c.want, 1e-12) << c.n << " " << c.c << " " << c.k;
}

TEST(PassAtKTest, MeanAndStandardError) {
  MeanAndError m = MeanWithStandardError({1, 0, 1, 0});
  EXPECT_DOUBLE_EQ(m.mean, 0.5);
  EXPECT_NEAR(m.standard_error, 0.28867513459481287, 1e-12);  // sqrt(1/3) / 2
  EXPECT_DOUBLE_EQ(MeanWithStandardError({0.25}).standard_error, 0);
  EXPECT_DOUBLE_EQ(MeanWithStandardError({}).mean, 0);
}

}  // namespace
}  // namespace flotilla::worker
