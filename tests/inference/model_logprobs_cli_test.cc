// `flotilla model logprobs` end to end: the binary's lines for a fixture's golden sequence, in
// the documented format, within 1e-4 of transformers' log-probs; bad input exits non-zero with
// the file named.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/hf_fixtures.h"
#include "testing/shell.h"

namespace flotilla::inference {
namespace {

std::string FlotillaFull() {
  const char* b = std::getenv("FLOTILLA_BINARY_DIR");
  return std::string(b != nullptr ? b : "..") + "/cli/flotilla-full";
}

TEST(ModelLogprobsCli, PrintsTransformersLogprobs) {
  const std::string dir = testing::HfFixtureRoot() + "/olmoe_b";
  const nlohmann::json golden = testing::ReadJsonFile(dir + "/golden.json");
  const auto& seq = golden["sequences"][1];
  const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i > 0 ? "," : "") + std::to_string(ids[i]);
  int status = 0;
  const std::string out =
      flotilla::testing::RunShell(FlotillaFull() + " model logprobs --model '" + dir + "' --ids " + list, &status);
  ASSERT_EQ(status, 0) << out;
  std::istringstream lines(out);
  std::string line;
  size_t t = 0;
  while (std::getline(lines, line)) {
    int tt = -1, next = -1, top1 = -1;
    double lp = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "t=%d next=%d logprob=%lf top1=%d", &tt, &next, &lp, &top1), 4) << line;
    ASSERT_LT(t, ids.size() - 1);
    EXPECT_EQ(tt, static_cast<int>(t));
    EXPECT_EQ(next, ids[t + 1]);
    EXPECT_NEAR(lp, seq["logprob"][t].get<double>(), 1e-4) << line;
    EXPECT_EQ(top1, seq["top1"][t].get<int>()) << line;
    ++t;
  }
  EXPECT_EQ(t, ids.size() - 1);
}

TEST(ModelLogprobsCli, BadInputNamesTheProblem) {
  int status = 0;
  std::string out = flotilla::testing::RunShell(
      FlotillaFull() + " model logprobs --model '" + testing::HfFixtureRoot() + "/llama_a' --ids 1,99999 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("token id 99999 outside [0, 512)"), std::string::npos) << out;
  out = flotilla::testing::RunShell(FlotillaFull() + " model logprobs --model /nonexistent-folder --ids 1,2 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("/nonexistent-folder/config.json: cannot open"), std::string::npos) << out;
}

}  // namespace
}  // namespace flotilla::inference
