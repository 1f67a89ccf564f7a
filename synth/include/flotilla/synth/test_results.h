// Per-test outcomes read from a test runner's output.
//
//   TestReport r = ParsePytestReport(output);        // `pytest -rA` short test summary
//   TestReport r = ParseAutomakeReport(output);      // automake's "PASS: name" lines
//
// Pure functions, thread-safe. A test named twice keeps its worst outcome (fail over pass),
// so a runner that prints a test's result more than once can never turn a failure into a pass.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::synth {

enum class TestOutcome { kPass, kFail, kSkip };

struct TestReport {
  std::map<std::string, TestOutcome> outcomes;   // test id -> outcome
  std::map<std::string, std::string> messages;   // failing test id -> its first message line

  int Count(TestOutcome o) const;
  std::vector<std::string> Names(TestOutcome o) const;
};

// Lines "PASSED id", "FAILED id - message", "ERROR id - message", "XFAIL id", "XPASS id",
// "SKIPPED ..." (skips carry no id and are not counted). XFAIL counts as a pass and XPASS as
// a failure (with strict xfail the run fails on it).
TestReport ParsePytestReport(std::string_view output);

// Lines "PASS: name", "FAIL: name", "XFAIL: name", "XPASS: name", "ERROR: name", "SKIP: name",
// as automake's parallel test harness prints them (and test-suite.log repeats them).
TestReport ParseAutomakeReport(std::string_view output);

std::string_view TestOutcomeName(TestOutcome o);

}  // namespace flotilla::synth
