#include "flotilla/synth/test_results.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace flotilla::synth {
namespace {

void Record(TestReport& r, const std::string& name, TestOutcome o, absl::string_view message) {
  if (name.empty()) return;
  auto [it, inserted] = r.outcomes.emplace(name, o);
  if (!inserted && o == TestOutcome::kFail) it->second = o;
  if (o == TestOutcome::kFail && !message.empty() && r.messages.count(name) == 0) {
    r.messages[name] = std::string(message.substr(0, 300));
  }
}

}  // namespace

int TestReport::Count(TestOutcome o) const {
  int n = 0;
  for (const auto& [name, out] : outcomes) n += out == o ? 1 : 0;
  return n;
}

std::vector<std::string> TestReport::Names(TestOutcome o) const {
  std::vector<std::string> v;
  for (const auto& [name, out] : outcomes) {
    if (out == o) v.push_back(name);
  }
  return v;
}

std::string_view TestOutcomeName(TestOutcome o) {
  switch (o) {
    case TestOutcome::kPass: return "pass";
    case TestOutcome::kFail: return "fail";
    case TestOutcome::kSkip: return "skip";
  }
  return "?";
}

TestReport ParsePytestReport(std::string_view output) {
  TestReport r;
  static const std::pair<absl::string_view, TestOutcome> kWords[] = {
      {"PASSED ", TestOutcome::kPass}, {"XFAIL ", TestOutcome::kPass}, {"FAILED ", TestOutcome::kFail},
      {"ERROR ", TestOutcome::kFail},  {"XPASS ", TestOutcome::kFail}};
  for (absl::string_view line : absl::StrSplit(absl::string_view(output.data(), output.size()), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    for (const auto& [word, outcome] : kWords) {
      if (!absl::StartsWith(line, word)) continue;
      absl::string_view rest = line.substr(word.size());
      absl::string_view message;
      size_t dash = rest.find(" - ");
      if (dash != absl::string_view::npos) {
        message = rest.substr(dash + 3);
        rest = rest.substr(0, dash);
      }
      // "ERROR collecting x.py" style lines name no test id.
      if (rest.find(' ') != absl::string_view::npos && rest.find("::") == absl::string_view::npos) break;
      Record(r, std::string(rest), outcome, message);
      break;
    }
  }
  return r;
}

TestReport ParseAutomakeReport(std::string_view output) {
  TestReport r;
  static const std::pair<absl::string_view, TestOutcome> kWords[] = {
      {"PASS: ", TestOutcome::kPass}, {"XFAIL: ", TestOutcome::kPass}, {"FAIL: ", TestOutcome::kFail},
      {"XPASS: ", TestOutcome::kFail}, {"ERROR: ", TestOutcome::kFail}, {"SKIP: ", TestOutcome::kSkip}};
  for (absl::string_view line : absl::StrSplit(absl::string_view(output.data(), output.size()), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    for (const auto& [word, outcome] : kWords) {
      if (!absl::StartsWith(line, word)) continue;
      absl::string_view rest = absl::StripAsciiWhitespace(line.substr(word.size()));
      // The summary block ("# PASS:  3") never matches: it starts with '#'.
      Record(r, std::string(rest), outcome, outcome == TestOutcome::kFail ? "test program failed" : "");
      break;
    }
  }
  return r;
}

}  // namespace flotilla::synth
