// The main() of every GoogleTest binary the project declares (flotilla_test). It runs the tests
// like GoogleTest's own main and then tells CTest the truth about skips:
//   - every test that ran was skipped (no GPU, not root, a kernel feature missing): exit
//     kAllSkippedExitCode, which flotilla_test declares as the test's SKIP_RETURN_CODE, so CTest
//     reports the binary as "Skipped" with the reason, never as "Passed";
//   - some tests passed and some were skipped: exit 0 (the binary passed) and print one
//     "FLOTILLA_PARTIAL_SKIP" line per skipped test with its reason, which scripts/test.sh lists
//     after CTest's run.
// A failure keeps GoogleTest's own exit status.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

constexpr int kAllSkippedExitCode = 77;

// The message GTEST_SKIP() was given (the first skip part of the test's result).
std::string SkipReason(const ::testing::TestResult& r) {
  for (int i = 0; i < r.total_part_count(); ++i) {
    const ::testing::TestPartResult& part = r.GetTestPartResult(i);
    if (part.skipped()) return part.message();
  }
  return "";
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  const int ran = unit.test_to_run_count();
  const int skipped = unit.skipped_test_count();
  if (skipped == 0) return 0;
  const char* binary = argc > 0 ? argv[0] : "test";
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      if (!info.should_run() || !info.result()->Skipped()) continue;
      std::printf("FLOTILLA_%s_SKIP %s: %s.%s: %s\n", skipped == ran ? "ALL" : "PARTIAL", binary, suite.name(),
                  info.name(), OneLine(SkipReason(*info.result())).c_str());
    }
  }
  std::fflush(stdout);
  return skipped == ran ? kAllSkippedExitCode : 0;
}
