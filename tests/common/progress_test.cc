#include "flotilla/common/progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace flotilla {
namespace {

// Everything written to the write end of a pipe so far.
std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

class ProgressBarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(fds_), 0);
    ASSERT_EQ(::fcntl(fds_[0], F_SETFL, O_NONBLOCK), 0);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fds_[2];
  FakeClock clock_;
};

TEST(ProgressRenderTest, BarCountPercentAndEstimate) {
  EXPECT_EQ(ProgressBar::Render("eval", 3, 12, 30, "pass@1=0.5", 8),
            "eval [##......]  3/12  25%  1m30s left  pass@1=0.5");
  EXPECT_EQ(ProgressBar::Render("run", 0, 4, 5, "", 4), "run [....]  0/4  0%");
  EXPECT_EQ(ProgressBar::Render("run", 4, 4, 7265, "", 4), "run [####]  4/4  100%  2h01m");
  EXPECT_EQ(ProgressBar::Render("build", 7, 0, 42, "", 4), "build 7 done  42s");
}

TEST_F(ProgressBarTest, PlainLinesAtMostOncePerIntervalAndAtTheEnd) {
  ProgressBar bar({.label = "trials", .total = 4, .fd = fds_[1], .tty = 0, .plain_interval_s = 10, .width = 4,
                   .clock = &clock_});
  EXPECT_FALSE(bar.tty());
  bar.Update(1, "a");
  clock_.AdvanceMillis(2000);
  bar.Update(2, "b");  // within the interval: not printed
  clock_.AdvanceMillis(9000);
  bar.Update(3, "c");
  bar.Finish("done");
  bar.Update(4, "ignored");
  EXPECT_EQ(Drain(fds_[0]),
            "trials [#...]  1/4  25%  0s left  a\n"
            "trials [###.]  3/4  75%  4s left  c\n"
            "trials [###.]  3/4  75%  4s left  done\n");
}

TEST_F(ProgressBarTest, TerminalRedrawsOneLineInPlace) {
  {
    ProgressBar bar({.label = "run", .total = 2, .fd = fds_[1], .tty = 1, .width = 2, .clock = &clock_});
    bar.Update(1);
    clock_.AdvanceMillis(50);
    bar.Update(1, "x");  // faster than the redraw interval
    clock_.AdvanceMillis(50);
    bar.Update(2);       // complete: drawn at once
  }                      // destruction finishes the line
  EXPECT_EQ(Drain(fds_[0]),
            "\r\033[Krun [#.]  1/2  50%  0s left"
            "\r\033[Krun [##]  2/2  100%  0s"
            "\r\033[Krun [##]  2/2  100%  0s\n");
}

TEST_F(ProgressBarTest, PlainFinishDoesNotRepeatTheLastLine) {
  ProgressBar bar({.label = "steps", .total = 2, .fd = fds_[1], .tty = 0, .plain_interval_s = 0, .width = 2,
                   .clock = &clock_});
  bar.Update(1);
  bar.Update(2);
  bar.Finish();
  EXPECT_EQ(Drain(fds_[0]), "steps [#.]  1/2  50%  0s left\nsteps [##]  2/2  100%  0s\n");
}

TEST_F(ProgressBarTest, NeverUpdatedPrintsNothing) {
  { ProgressBar bar({.label = "quiet", .total = 3, .fd = fds_[1], .tty = 0, .clock = &clock_}); }
  EXPECT_EQ(Drain(fds_[0]), "");
}

}  // namespace
}  // namespace flotilla
