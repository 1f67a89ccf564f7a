// The merge recipe: what parses, and each bad recipe's error naming the file, line and field.
#include "flotilla/merge/merge_config.h"

#include "gtest/gtest.h"
#include "tensor_class.h"

namespace flotilla::merge {
namespace {

TEST(MergeConfigTest, ParsesModelsClassesAndGradients) {
  auto cfg = ParseMergeConfig(R"(method: ties
base_model: base
models:
  - model: a
    parameters: {weight: 0.7, density: [0.2, 0.8], routed_experts: {density: 0.3}}
  - model: /abs/b
parameters:
  density: 0.5
  lambda: 0.9
  attention: {lambda: [1, 0]}
dtype: bfloat16
seed: 42
)",
                              "r.yaml", "/recipes");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->method, MergeMethod::kTies);
  EXPECT_EQ(cfg->base_model, "/recipes/base");
  ASSERT_EQ(cfg->models.size(), 2u);
  EXPECT_EQ(cfg->models[0].path, "/recipes/a");
  EXPECT_EQ(cfg->models[1].path, "/abs/b");
  EXPECT_EQ(cfg->dtype, inference::DType::kBF16);
  EXPECT_EQ(cfg->seed, 42u);
  const ParamValue* d = cfg->models[0].params.Find("density", TensorClass::kAttention);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->points, (std::vector<double>{0.2, 0.8}));
  EXPECT_EQ(cfg->models[0].params.Find("density", TensorClass::kRoutedExperts)->points,
            std::vector<double>{0.3});
  EXPECT_EQ(cfg->params.Find("lambda", TensorClass::kAttention)->points, (std::vector<double>{1, 0}));
  EXPECT_EQ(cfg->params.Find("lambda", TensorClass::kNorms)->points, std::vector<double>{0.9});
  EXPECT_EQ(cfg->models[1].params.Find("density", TensorClass::kOther), nullptr);
}

TEST(MergeConfigTest, AcceptsMergekitsMergeMethodKey) {
  auto cfg = ParseMergeConfig("merge_method: slerp\nbase_model: b\nmodels: [{model: a}]\nparameters: {t: 0.25}\n",
                              "m.yaml", "");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->method, MergeMethod::kSlerp);
  EXPECT_EQ(cfg->params.Find("t", TensorClass::kAttention)->points, std::vector<double>{0.25});
}

TEST(MergeConfigTest, GradientInterpolatesOverLayers) {
  ParamValue v{{0.0, 1.0, 0.0}};
  EXPECT_DOUBLE_EQ(v.At(0, 5, false), 0.0);
  EXPECT_DOUBLE_EQ(v.At(1, 5, false), 0.5);
  EXPECT_DOUBLE_EQ(v.At(2, 5, false), 1.0);
  EXPECT_DOUBLE_EQ(v.At(3, 5, false), 0.5);
  EXPECT_DOUBLE_EQ(v.At(4, 5, false), 0.0);
  ParamValue w{{0.2, 0.6}};
  EXPECT_DOUBLE_EQ(w.At(-1, 4, false), 0.2);  // embeddings: the first point
  EXPECT_DOUBLE_EQ(w.At(-1, 4, true), 0.6);   // final norm, lm_head: the last
  EXPECT_DOUBLE_EQ(w.At(0, 1, false), 0.2);
  EXPECT_DOUBLE_EQ(ParamValue{{0.3}}.At(7, 9, false), 0.3);
}

struct BadRecipe {
  const char* yaml;
  const char* error;  // the whole message
};

TEST(MergeConfigTest, BadRecipesNameFileLineAndField) {
  const BadRecipe cases[] = {
      {"method: average\nmodels: [{model: a}]\n",
       "m.yaml:1: method: unknown method 'average' (want linear, slerp, task_arithmetic, ties, dare_linear, "
       "dare_ties, model_stock)"},
      {"method: linear\n", "m.yaml:1: models: missing required field: a list of models"},
      {"method: linear\nmodels: []\n", "m.yaml:2: models: at least one model is required"},
      {"method: ties\nmodels:\n  - model: a\n    parameters: {density: 0.5}\n",
       "m.yaml:1: base_model: ties needs a base_model"},
      {"method: ties\nbase_model: b\nmodels:\n  - model: a\n    parameters: {density: 1.5}\n",
       "m.yaml:5: models[0].parameters.density: 1.5 is outside (0, 1]"},
      {"method: ties\nbase_model: b\nmodels:\n  - model: a\n",
       "m.yaml:4: models[0].parameters.density: ties needs a density for every model"},
      {"method: slerp\nbase_model: b\nmodels: [{model: a}, {model: c}]\nparameters: {t: 0.5}\n",
       "m.yaml:3: models: slerp merges the base with exactly one model, got 2"},
      {"method: slerp\nbase_model: b\nmodels: [{model: a}]\n",
       "m.yaml:1: parameters.t: slerp needs t (0: the base, 1: the model)"},
      {"method: slerp\nbase_model: b\nmodels: [{model: a}]\nparameters: {t: [0, 2]}\n",
       "m.yaml:4: parameters.t[1]: 2 is outside [0, 1]"},
      {"method: model_stock\nbase_model: b\nmodels: [{model: a}]\n",
       "m.yaml:3: models: model_stock needs at least two fine-tuned models, got 1"},
      {"method: linear\nmodels: [{model: a, parameters: {wieght: 1}}]\n",
       "m.yaml:2: models[0].parameters.wieght: unknown parameter (want weight, density, t, lambda, normalize, or "
       "a tensor class: attention, router, routed_experts, shared_experts, norms, embeddings)"},
      {"method: linear\nmodels: [{model: a, parameters: {lambda: 1}}]\n",
       "m.yaml:2: models[0].parameters.lambda: unknown parameter (want weight, density, t, lambda, normalize, or "
       "a tensor class: attention, router, routed_experts, shared_experts, norms, embeddings)"},
      {"method: linear\nmodels: [{model: a}]\nparameters:\n  experts: {weight: 1}\n",
       "m.yaml:4: parameters.experts: unknown parameter (want weight, density, t, lambda, normalize, or a tensor "
       "class: attention, router, routed_experts, shared_experts, norms, embeddings)"},
      {"method: linear\nmodels: [{model: a}]\nparameters:\n  router: {weight: heavy}\n",
       "m.yaml:4: parameters.router.weight: expected a number, got 'heavy'"},
      {"method: linear\nmodels: [{model: a}]\ndtype: float16\n",
       "m.yaml:3: dtype: unsupported dtype 'float16' (want float32 or bfloat16)"},
      {"method: ties\nbase_model: a\nmodels:\n  - model: a\n    parameters: {density: 0.5}\n",
       "m.yaml:4: models[0].model: the base model cannot also be one of the models"},
      {"method: linear\nmodels: [{model: a}]\nseed: -3\n", "m.yaml:3: seed: must be >= 0"},
      {"method: linear\nmodel: [{model: a}]\n",
       "m.yaml:2: model: unknown field (expected one of: method, merge_method, base_model, models, parameters, "
       "dtype, seed)"},
      {"method: linear\nmerge_method: ties\nmodels: [{model: a}]\n",
       "m.yaml:2: merge_method: give method or merge_method, not both"},
  };
  for (const BadRecipe& c : cases) {
    auto cfg = ParseMergeConfig(c.yaml, "m.yaml", "");
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_EQ(std::string(cfg.status().message()), c.error) << c.yaml;
  }
}

struct Named {
  const char* name;
  size_t rank;
  TensorClass cls;
  int layer;
  bool slices;
};

TEST(TensorClassTest, ClassifiesHuggingFaceAndFlotillaNames) {
  const Named cases[] = {
      {"model.embed_tokens.weight", 2, TensorClass::kEmbeddings, -1, false},
      {"lm_head.weight", 2, TensorClass::kEmbeddings, -1, false},
      {"model.norm.weight", 1, TensorClass::kNorms, -1, false},
      {"model.layers.3.input_layernorm.weight", 1, TensorClass::kNorms, 3, false},
      {"model.layers.3.self_attn.q_norm.weight", 1, TensorClass::kNorms, 3, false},
      {"model.layers.12.self_attn.q_proj.weight", 2, TensorClass::kAttention, 12, false},
      {"model.layers.2.mlp.gate.weight", 2, TensorClass::kRouter, 2, false},
      {"model.layers.2.mlp.gate.e_score_correction_bias", 1, TensorClass::kRouter, 2, false},
      {"model.layers.2.block_sparse_moe.gate.weight", 2, TensorClass::kRouter, 2, false},
      {"model.layers.2.mlp.experts.17.gate_proj.weight", 2, TensorClass::kRoutedExperts, 2, false},
      {"model.layers.2.mlp.experts.gate_up_proj", 3, TensorClass::kRoutedExperts, 2, true},
      {"model.layers.2.mlp.experts.down_proj", 3, TensorClass::kRoutedExperts, 2, true},
      {"model.layers.2.mlp.shared_expert.up_proj.weight", 2, TensorClass::kSharedExperts, 2, false},
      {"model.layers.2.mlp.shared_experts.down_proj.weight", 2, TensorClass::kSharedExperts, 2, false},
      {"model.layers.2.mlp.shared_expert_gate.weight", 2, TensorClass::kSharedExperts, 2, false},
      {"model.layers.0.mlp.gate_proj.weight", 2, TensorClass::kOther, 0, false},
      {"embed.weight", 2, TensorClass::kEmbeddings, -1, false},
      {"norm.weight", 1, TensorClass::kNorms, -1, false},
      {"layers.1.attn.wq", 2, TensorClass::kAttention, 1, false},
      {"layers.1.attn_norm.weight", 1, TensorClass::kNorms, 1, false},
      {"layers.1.moe.router", 2, TensorClass::kRouter, 1, false},
      {"layers.1.moe.experts.w1", 3, TensorClass::kRoutedExperts, 1, true},
      {"layers.1.moe.shared.w2", 3, TensorClass::kSharedExperts, 1, true},
  };
  for (const Named& c : cases) {
    TensorPlace p = ClassifyTensor(c.name, c.rank);
    EXPECT_EQ(TensorClassName(p.cls), std::string(TensorClassName(c.cls))) << c.name;
    EXPECT_EQ(p.layer, c.layer) << c.name;
    EXPECT_EQ(p.per_expert_slices, c.slices) << c.name;
  }
  EXPECT_FALSE(ClassifyTensor("model.embed_tokens.weight", 2).at_end);
  EXPECT_TRUE(ClassifyTensor("lm_head.weight", 2).at_end);
  EXPECT_TRUE(ClassifyTensor("model.norm.weight", 1).at_end);
}

}  // namespace
}  // namespace flotilla::merge
