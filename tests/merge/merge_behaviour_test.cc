// RunMerge's behaviour beyond the arithmetic: per-layer gradients and class parameters, expert
// slices, refusals of mismatched parents, shards and index, provenance, output dtype, and the
// RL loop's `policy.init: merge:CONFIG.yaml`.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "flotilla/merge/merge.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/worker/embedded_worker.h"
#include "gtest/gtest.h"
#include "merge/merge_test_util.h"
#include "nlohmann/json.hpp"
#include "provenance.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"
#include "weights.h"

namespace flotilla::merge {
namespace {

using fixtures::TensorMap;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<MergeResult> Merge(const std::string& yaml, const std::string& out, MergeOptions o = {}) {
  auto cfg = ParseMergeConfig(yaml, "t.yaml", "");
  if (!cfg.ok()) return cfg.status();
  return RunMerge(*cfg, out, o);
}

class MergeBehaviourTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fixtures::Gaussian(fixtures::HfLayout(), 1, 1.0f);
    a_ = fixtures::Plus(base_, fixtures::Gaussian(fixtures::HfLayout(), 2, 1.0f), 0.5f);
    b_ = fixtures::Plus(base_, fixtures::Gaussian(fixtures::HfLayout(), 3, 1.0f), 0.5f);
    fixtures::WriteHfFolder(base_, dir_.file("base"));
    fixtures::WriteHfFolder(a_, dir_.file("a"));
    fixtures::WriteHfFolder(b_, dir_.file("b"));
  }
  flotilla::testing::TempDir dir_;
  TensorMap base_, a_, b_;
};

TEST_F(MergeBehaviourTest, GradientsAndClassParametersPickEachLayersParent) {
  // Linear, normalized: weight [1, 0] for a and [0, 1] for b give a's layer 0 and b's layer 1;
  // routers take b everywhere (a class value), embeddings the gradients' first point (a),
  // lm_head and the final norm the last (b).
  auto r = Merge(absl::StrCat("method: linear\nmodels:\n  - model: ", dir_.file("a"),
                              "\n    parameters: {weight: [1, 0], router: {weight: 0}}\n  - model: ", dir_.file("b"),
                              "\n    parameters: {weight: [0, 1], router: {weight: 1}}\n"),
                 dir_.file("out"));
  ASSERT_TRUE(r.ok()) << r.status();
  TensorMap out = fixtures::ReadTensors(dir_.file("out/model.safetensors"));
  EXPECT_EQ(out["model.layers.0.self_attn.q_proj.weight"].values, a_["model.layers.0.self_attn.q_proj.weight"].values);
  EXPECT_EQ(out["model.layers.0.mlp.experts.gate_up_proj"].values, a_["model.layers.0.mlp.experts.gate_up_proj"].values);
  EXPECT_EQ(out["model.layers.1.self_attn.k_proj.weight"].values, b_["model.layers.1.self_attn.k_proj.weight"].values);
  EXPECT_EQ(out["model.layers.0.mlp.gate.weight"].values, b_["model.layers.0.mlp.gate.weight"].values);
  EXPECT_EQ(out["model.layers.0.mlp.gate.e_score_correction_bias"].values,
            b_["model.layers.0.mlp.gate.e_score_correction_bias"].values);
  EXPECT_EQ(out["model.embed_tokens.weight"].values, a_["model.embed_tokens.weight"].values);
  EXPECT_EQ(out["lm_head.weight"].values, b_["lm_head.weight"].values);
  EXPECT_EQ(out["model.norm.weight"].values, b_["model.norm.weight"].values);
  EXPECT_EQ(r->tensors, 17u);
  EXPECT_EQ(r->units, 17u - 2 + 4 + 4);  // the two fused expert tensors in 4 slices each
}

TEST_F(MergeBehaviourTest, AStackedExpertMergesLikeTheSameExpertAlone) {
  // Expert 2 of the fused down_proj, saved alone under the unfused name, merges to the same values
  // by TIES and by model stock: both layouts give one result.
  const std::string fused = "model.layers.0.mlp.experts.down_proj";
  auto slice = [&](const TensorMap& m) {
    const auto& t = m.at(fused);
    const size_t n = 16 * 8;
    TensorMap s;
    s["model.layers.0.mlp.experts.2.down_proj.weight"] = {{16, 8}, {t.values.begin() + 2 * n, t.values.begin() + 3 * n}};
    return s;
  };
  TensorMap c = fixtures::Plus(base_, fixtures::Gaussian(fixtures::HfLayout(), 9, 1.0f), 0.4f);
  fixtures::WriteHfFolder(c, dir_.file("c"));
  for (const char* name : {"base", "a", "b", "c"}) {
    const TensorMap& m = std::string(name) == "base" ? base_ : std::string(name) == "a" ? a_ : std::string(name) == "b" ? b_ : c;
    fixtures::WriteHfFolder(slice(m), dir_.file(absl::StrCat("s", name)));
  }
  for (const char* method : {"ties", "model_stock"}) {
    auto recipe = [&](const std::string& p) {
      return absl::StrCat("method: ", method, "\nbase_model: ", dir_.file(p + "base"), "\nparameters: {density: 0.4}\n",
                          "models: [{model: ", dir_.file(p + "a"), "}, {model: ", dir_.file(p + "b"),
                          "}, {model: ", dir_.file(p + "c"), "}]\n");
    };
    ASSERT_TRUE(Merge(recipe(""), dir_.file(absl::StrCat("full-", method))).ok());
    ASSERT_TRUE(Merge(recipe("s"), dir_.file(absl::StrCat("one-", method))).ok());
    TensorMap full = fixtures::ReadTensors(dir_.file(absl::StrCat("full-", method, "/model.safetensors")));
    TensorMap one = fixtures::ReadTensors(dir_.file(absl::StrCat("one-", method, "/model.safetensors")));
    EXPECT_EQ(slice(full).begin()->second.values, one.begin()->second.values) << method;
    EXPECT_NE(one.begin()->second.values, slice(base_).begin()->second.values) << method;
  }
}

TEST_F(MergeBehaviourTest, RefusesAnotherArchitecture) {
  fixtures::WriteHfFolder(a_, dir_.file("wide"),
                          R"({"model_type": "deepseek_v3", "hidden_size": 16, "n_routed_experts": 8, "vocab_size": 32})");
  auto r = Merge(absl::StrCat("method: task_arithmetic\nbase_model: ", dir_.file("base"),
                              "\nmodels: [{model: ", dir_.file("wide"), "}]\n"),
                 dir_.file("out"));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("model '", dir_.file("wide"), "': architecture differs from the base '", dir_.file("base"),
                         "': config.json n_routed_experts is 8, the base has 4"));

  TensorMap missing = a_;
  missing.erase("model.layers.1.mlp.shared_expert_gate.weight");
  fixtures::WriteHfFolder(missing, dir_.file("missing"));
  r = Merge(absl::StrCat("method: linear\nbase_model: ", dir_.file("base"), "\nmodels: [{model: ", dir_.file("missing"),
                         "}]\n"),
            dir_.file("out"));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), absl::StrCat("model '", dir_.file("missing"),
                                               "': architecture differs from the base: no tensor "
                                               "'model.layers.1.mlp.shared_expert_gate.weight'"));
}

TEST_F(MergeBehaviourTest, RefusesAnotherVocabulary) {
  TensorMap bigger = a_;
  bigger["model.embed_tokens.weight"] = {{40, 16}, std::vector<float>(640, 0.5f)};
  fixtures::WriteHfFolder(bigger, dir_.file("bigger"));
  auto r = Merge(absl::StrCat("method: ties\nbase_model: ", dir_.file("base"), "\nmodels: [{model: ",
                              dir_.file("bigger"), ", parameters: {density: 0.5}}]\n"),
                 dir_.file("out"));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("model '", dir_.file("bigger"),
                         "': vocabulary differs from the base: tensor 'model.embed_tokens.weight' has shape [40, 16], "
                         "the base's is [32, 16]"));

  fixtures::WriteHfFolder(a_, dir_.file("retok"),
                          R"({"model_type": "deepseek_v3", "hidden_size": 16, "n_routed_experts": 4, "vocab_size": 32})",
                          R"({"model": {"type": "BPE", "vocab": {"b": 0}}})");
  r = Merge(absl::StrCat("method: slerp\nbase_model: ", dir_.file("base"), "\nparameters: {t: 0.5}\nmodels: [{model: ",
                         dir_.file("retok"), "}]\n"),
            dir_.file("out"));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), absl::StrCat("model '", dir_.file("retok"),
                                               "': vocabulary differs from the base: tokenizer.json has different "
                                               "contents"));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out"))) << "a refused merge writes nothing";
}

TEST_F(MergeBehaviourTest, ShardsUnderTheCapWithAnIndex) {
  MergeOptions o;
  o.max_shard_bytes = 4096;
  auto r = Merge(absl::StrCat("method: linear\nmodels: [{model: ", dir_.file("a"), "}, {model: ", dir_.file("b"), "}]\n"),
                 dir_.file("out"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->shards.size(), 2u);
  EXPECT_EQ(r->weights_path, dir_.file("out/model.safetensors.index.json"));
  nlohmann::json index = nlohmann::json::parse(ReadAll(r->weights_path));
  EXPECT_EQ(index["weight_map"].size(), 17u);
  uint64_t total = 0;
  TensorMap all;
  for (const std::string& s : r->shards) {
    EXPECT_EQ(std::filesystem::path(s).filename().string().substr(0, 6), "model-");
    TensorMap part = fixtures::ReadTensors(s);
    uint64_t bytes = 0;
    for (auto& [name, t] : part) {
      EXPECT_EQ(index["weight_map"][name], std::filesystem::path(s).filename().string());
      bytes += t.values.size() * 4;
      all[name] = t;
    }
    EXPECT_TRUE(bytes <= 4096 || part.size() == 1) << s;
    total += bytes;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  // The sharded folder is itself a parent: merging it with itself gives it back.
  auto again = Merge(absl::StrCat("method: linear\nmodels: [{model: ", dir_.file("out"), "}, {model: ",
                                  dir_.file("out"), "}]\n"),
                     dir_.file("again"));
  ASSERT_TRUE(again.ok()) << again.status();
  TensorMap back = fixtures::ReadTensors(dir_.file("again/model.safetensors"));
  ASSERT_EQ(back.size(), all.size());
  for (auto& [name, t] : all) EXPECT_EQ(back[name].values, t.values) << name;
}

TEST_F(MergeBehaviourTest, RecordsProvenanceAndCopiesTheBasesFiles) {
  const std::string yaml = absl::StrCat("method: dare_ties\nseed: 9\nbase_model: ", dir_.file("base"),
                                        "\nparameters: {density: 0.5}\nmodels: [{model: ", dir_.file("a"),
                                        "}, {model: ", dir_.file("b"), "}]\n");
  ASSERT_TRUE(Merge(yaml, dir_.file("out")).ok());
  nlohmann::json p = nlohmann::json::parse(ReadAll(dir_.file("out/merge_provenance.json")));
  EXPECT_EQ(p["method"], "dare_ties");
  EXPECT_EQ(p["config"], yaml);
  EXPECT_EQ(p["seed"], 9);
  ASSERT_EQ(p["parents"].size(), 3u);
  EXPECT_EQ(p["parents"][0]["role"], "base");
  EXPECT_EQ(p["parents"][2]["path"], dir_.file("b"));
  int st = 0;
  std::string sum = flotilla::testing::RunShell(absl::StrCat("sha256sum ", dir_.file("a/model.safetensors")), &st);
  ASSERT_EQ(st, 0);
  EXPECT_EQ(p["parents"][1]["sha256"]["model.safetensors"], sum.substr(0, 64));
  auto own = Sha256File(dir_.file("out/model.safetensors"));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(p["output_sha256"]["model.safetensors"], *own);
  EXPECT_EQ(ReadAll(dir_.file("out/config.json")), ReadAll(dir_.file("base/config.json")));
  EXPECT_EQ(ReadAll(dir_.file("out/tokenizer.json")), ReadAll(dir_.file("base/tokenizer.json")));
  // The same recipe again gives the same bytes (DARE's masks are seeded).
  ASSERT_TRUE(Merge(yaml, dir_.file("out2")).ok());
  EXPECT_EQ(ReadAll(dir_.file("out/model.safetensors")), ReadAll(dir_.file("out2/model.safetensors")));
  // A non-empty output folder is not overwritten unless asked.
  auto again = Merge(yaml, dir_.file("out"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(MergeBehaviourTest, Bfloat16OutputRoundsTheFloat32Merge) {
  const std::string recipe = absl::StrCat("method: task_arithmetic\nbase_model: ", dir_.file("base"),
                                          "\nmodels: [{model: ", dir_.file("a"), "}, {model: ", dir_.file("b"), "}]\n");
  ASSERT_TRUE(Merge(recipe, dir_.file("f32")).ok());
  ASSERT_TRUE(Merge(recipe + "dtype: bfloat16\n", dir_.file("bf16")).ok());
  auto f = inference::SafetensorsFile::Open(dir_.file("bf16/model.safetensors"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->tensors().at("lm_head.weight").dtype, inference::DType::kBF16);
  TensorMap full = fixtures::ReadTensors(dir_.file("f32/model.safetensors"));
  TensorMap half = fixtures::ReadTensors(dir_.file("bf16/model.safetensors"));
  for (auto& [name, t] : full) {
    for (size_t i = 0; i < t.values.size(); ++i) {
      ASSERT_EQ(half[name].values[i], inference::Bf16ToF32(inference::F32ToBf16(t.values[i]))) << name << " " << i;
    }
  }
}

inference::ModelConfig SmallFlotillaModel() {
  inference::ModelConfig mc;
  mc.vocab_size = 32;
  mc.n_layers = 2;
  mc.d_model = 16;
  mc.n_heads = 2;
  mc.n_kv_heads = 2;
  mc.head_dim = 8;
  mc.n_experts = 4;
  mc.top_k = 2;
  mc.n_shared_experts = 1;
  mc.expert_hidden = 8;
  mc.max_context = 32;
  return mc;
}

// Random weights of `mc` in Flotilla's names, as the trainer writes them.
void WriteFlotillaWeights(const inference::ModelConfig& mc, uint64_t seed, const std::string& path) {
  inference::ModelWeights w = *inference::ModelWeights::Random(mc, seed, 0.1f, 0);
  std::vector<inference::TensorToWrite> out;
  for (const inference::TensorSlot& s : inference::TensorSlots(w)) {
    out.push_back({s.name, s.shape, s.dst->data(), inference::DType::kF32});
  }
  ASSERT_TRUE(inference::WriteSafetensors(path, out).ok()) << path;
}

TEST(MergeInitTest, ExperimentStartsFromAMergeTheEngineLoads) {
  flotilla::testing::TempDir dir;
  const inference::ModelConfig mc = SmallFlotillaModel();
  for (int i = 0; i < 3; ++i) WriteFlotillaWeights(mc, 100 + i, dir.file(absl::StrCat("v", i, ".safetensors")));
  fixtures::WriteText(dir.file("recipe.yaml"),
                      "method: model_stock\nbase_model: v0.safetensors\nmodels:\n  - model: v1.safetensors\n"
                      "  - model: v2.safetensors\n");
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  std::string text = ReadAll(absl::StrCat(src, "/examples/arith-grpo/experiment.yaml"));
  text = absl::StrReplaceAll(text, {{"init: random", "init: merge:recipe.yaml"}});
  auto cfg = trainer_bridge::ParseExperimentConfig(text, "experiment.yaml", dir.path().string());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->policy.init, "merge:" + dir.file("recipe.yaml"));
  auto weights = ResolveMergeInit(cfg->policy.init, dir.file("run/merged-init"));
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(*weights, dir.file("run/merged-init/model.safetensors"));
  auto loaded = inference::ModelWeights::Load(mc, *weights, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->layers.size(), 2u);
  // A plain path passes through; a broken recipe is an error naming the spec.
  EXPECT_EQ(*ResolveMergeInit(dir.file("v0.safetensors"), dir.file("x")), dir.file("v0.safetensors"));
  fixtures::WriteText(dir.file("bad.yaml"), "method: model_stock\nmodels: [{model: v1.safetensors}]\n");
  auto bad = ResolveMergeInit("merge:" + dir.file("bad.yaml"), dir.file("y"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MergeServeTest, AMergedFolderServesInTheEmbeddedWorker) {
  // Flotilla folders (config.json + model.safetensors) merged by SLERP: the output folder has the
  // base's config.json, so `flotilla eval -m DIR` / `flotilla up -m DIR` serve it as it is.
  flotilla::testing::TempDir dir;
  const inference::ModelConfig mc = SmallFlotillaModel();
  for (const char* name : {"p0", "p1"}) {
    std::filesystem::create_directories(dir.file(name));
    WriteFlotillaWeights(mc, name[1] == '0' ? 7 : 8, dir.file(absl::StrCat(name, "/model.safetensors")));
    fixtures::WriteText(dir.file(absl::StrCat(name, "/config.json")), mc.ToJson());
  }
  auto r = Merge(absl::StrCat("method: slerp\nbase_model: ", dir.file("p0"), "\nparameters: {t: 0.5}\nmodels: [{model: ",
                              dir.file("p1"), "}]\n"),
                 dir.file("merged"));
  ASSERT_TRUE(r.ok()) << r.status();
  worker::EmbeddedWorkerOptions o;
  o.model_prefix = dir.file("merged");
  o.state_dir = dir.file("state");
  o.threads = 1;
  auto w = worker::EmbeddedWorker::Start(o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->config().ToJson(), mc.ToJson());
}

}  // namespace
}  // namespace flotilla::merge
