#include "flotilla/inference/model_config.h"
#include "gtest/gtest.h"

namespace flotilla::inference {
namespace {

TEST(ModelConfigTest, JsonRoundTrip) {
  ModelConfig c;
  c.n_layers = 3;
  c.n_kv_heads = 2;
  c.sliding_window = 128;
  c.sliding_layers = {0, 2};
  c.tie_embeddings = true;
  auto back = ModelConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->sliding_layers, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(back->routing_width(), 6);
}

TEST(ModelConfigTest, DefaultIsAFewMillionParameters) {
  ModelConfig c;
  EXPECT_EQ(c.parameter_count(), 8276224u);  // same count as the PyTorch reference
}

TEST(ModelConfigTest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  for (const Case& k : std::vector<Case>{{"{\"n_heads\": 4, \"n_kv_heads\": 3}", "n_kv_heads"},
                                         {"{\"top_k\": 9}", "top_k"},
                                         {"{\"d_model\": \"big\"}", "d_model"},
                                         {"{\"sliding_layers\": [1]}", "sliding_window"},
                                         {"{\"sliding_window\": 4, \"sliding_layers\": [7]}", "sliding_layers"},
                                         {"{\"n_layer\": 2}", "n_layer"},
                                         {"{\"head_dim\": 7}", "head_dim"}}) {
    auto r = ModelConfig::FromJson(k.json);
    ASSERT_FALSE(r.ok()) << k.json;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(k.field), std::string::npos) << r.status();
  }
  EXPECT_EQ(ModelConfig::FromJson("[1]").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelConfig::FromJson("{").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::inference
