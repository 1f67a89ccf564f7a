// The Hugging Face checkpoint loader: shards through model.safetensors.index.json, the dtypes
// (BF16, F16, F8_E4M3 with 128x128 block scales), and the errors for bad folders, each naming
// the file and the field or tensor.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "flotilla/inference/hf_config.h"
#include "flotilla/inference/hf_model.h"
#include "flotilla/inference/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hf_checkpoint.h"
#include "inference/hf_fixtures.h"
#include "testing/temp_dir.h"

namespace flotilla::inference {
namespace {

using ::testing::HasSubstr;
using testing::HfFixtureRoot;

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Every tensor of a fixture's single model.safetensors, widened to f32.
std::map<std::string, Tensor> ReadAll(const std::string& dir) {
  std::map<std::string, Tensor> out;
  auto f = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return out;
  for (const auto& [name, t] : (*f)->tensors()) {
    Tensor& o = out[name];
    o.shape = t.shape;
    for (int64_t i = 0; i < t.numel(); ++i) o.data.push_back(ElementAsF32(t, static_cast<size_t>(i)));
  }
  return out;
}

void Write(const std::string& path, const std::map<std::string, Tensor>& tensors, DType dtype = DType::kF32) {
  std::vector<TensorToWrite> w;
  for (const auto& [name, t] : tensors) w.push_back({name, t.shape, t.data.data(), dtype});
  ASSERT_TRUE(WriteSafetensors(path, w).ok());
}

void CopyConfig(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from + "/config.json", to + "/config.json");
}

std::vector<int32_t> Ids(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % 512);
  return ids;
}

class HfCheckpointTest : public ::testing::Test {
 protected:
  std::string fixture_ = HfFixtureRoot() + "/llama_a";
  testing::TempDir dir_;
};

TEST_F(HfCheckpointTest, ShardedIndexGivesTheSameModel) {
  auto tensors = ReadAll(fixture_);
  ASSERT_FALSE(tensors.empty());
  std::map<std::string, Tensor> a, b;
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto& [name, t] : tensors) {
    const bool first = i++ % 2 == 0;
    (first ? a : b)[name] = t;
    index["weight_map"][name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  const std::string d = dir_.path().string();
  Write(d + "/model-00001-of-00002.safetensors", a);
  Write(d + "/model-00002-of-00002.safetensors", b);
  std::ofstream(d + "/model.safetensors.index.json") << index.dump();
  CopyConfig(fixture_, d);
  auto sharded = HfModel::Load(d);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  auto single = HfModel::Load(fixture_);
  ASSERT_TRUE(single.ok()) << single.status();
  auto s1 = (*sharded)->Score(Ids(20));
  auto s2 = (*single)->Score(Ids(20));
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(s1->logprob, s2->logprob);
  EXPECT_EQ(s1->top1, s2->top1);

  // An index that puts a tensor in a shard without it.
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  const bool norm_in_first = a.count("model.norm.weight") > 0;
  if (!norm_in_first) index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(d + "/model.safetensors.index.json", std::ios::trunc) << index.dump();
  auto bad = HfModel::Load(d);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'model.norm.weight'"));
}

// transformers 5's in-memory layout, fused experts (gate_up_proj [E, 2I, H], down_proj
// [E, H, I]), gives the same model as the per-expert names save_pretrained writes.
TEST_F(HfCheckpointTest, FusedExpertLayoutGivesTheSameModel) {
  const std::string fixture = HfFixtureRoot() + "/qwen3_moe_sparse";
  auto config = HfConfig::FromDir(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  const int64_t E = config->num_experts, I = config->moe_intermediate_size, Hd = config->hidden_size;
  auto tensors = ReadAll(fixture);
  int fused_layers = 0;
  for (int l = 0; l < config->num_layers; ++l) {
    if (!config->moe_layer[l]) continue;
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    Tensor gate_up{{E, 2 * I, Hd}, {}}, down{{E, Hd, I}, {}};
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + std::to_string(e) + ".";
      for (const char* part : {"gate_proj", "up_proj"}) {
        const Tensor& t = tensors.at(q + part + ".weight");
        gate_up.data.insert(gate_up.data.end(), t.data.begin(), t.data.end());
        tensors.erase(q + part + ".weight");
      }
      const Tensor& d = tensors.at(q + "down_proj.weight");
      down.data.insert(down.data.end(), d.data.begin(), d.data.end());
      tensors.erase(q + "down_proj.weight");
    }
    tensors[p + "gate_up_proj"] = gate_up;
    tensors[p + "down_proj"] = down;
    ++fused_layers;
  }
  ASSERT_EQ(fused_layers, 2);
  const std::string d = dir_.path().string();
  Write(d + "/model.safetensors", tensors);
  CopyConfig(fixture, d);
  auto fused = HfModel::Load(d);
  ASSERT_TRUE(fused.ok()) << fused.status();
  auto per_expert = HfModel::Load(fixture);
  ASSERT_TRUE(per_expert.ok()) << per_expert.status();
  auto s1 = (*fused)->Score(Ids(40));
  auto s2 = (*per_expert)->Score(Ids(40));
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(s1->logprob, s2->logprob);
  EXPECT_EQ(s1->experts, s2->experts);
}

TEST_F(HfCheckpointTest, MissingTensorNamesTheTensorAndFile) {
  auto tensors = ReadAll(fixture_);
  tensors.erase("model.layers.1.self_attn.k_proj.weight");
  const std::string d = dir_.path().string();
  Write(d + "/model.safetensors", tensors);
  CopyConfig(fixture_, d);
  auto m = HfModel::Load(d);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            d + "/model.safetensors: missing tensor 'model.layers.1.self_attn.k_proj.weight'");
}

TEST_F(HfCheckpointTest, MisShapedTensorNamesBothShapes) {
  auto tensors = ReadAll(fixture_);
  Tensor& t = tensors.at("model.layers.0.mlp.up_proj.weight");
  t.shape = {t.shape[1], t.shape[0]};
  const std::string d = dir_.path().string();
  Write(d + "/model.safetensors", tensors);
  CopyConfig(fixture_, d);
  auto m = HfModel::Load(d);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), d + "/model.safetensors: tensor 'model.layers.0.mlp.up_proj.weight' has shape "
                                      "[64, 128], config.json wants [128, 64]");
}

TEST_F(HfCheckpointTest, Bf16CheckpointWidensExactly) {
  auto tensors = ReadAll(fixture_);
  const std::string d = dir_.path().string();
  Write(d + "/model.safetensors", tensors, DType::kBF16);
  CopyConfig(fixture_, d);
  auto ckpt = HfCheckpoint::Open(d);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<float> got;
  const Tensor& want = tensors.at("model.embed_tokens.weight");
  ASSERT_TRUE((*ckpt)->Read("model.embed_tokens.weight", want.shape, &got).ok());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], Bf16ToF32(F32ToBf16(want.data[i]))) << i;
}

// A header written by hand: one tensor of any dtype name and raw bytes.
void WriteRaw(const std::string& path, const std::string& header_json, const std::string& bytes) {
  std::string h = header_json;
  while (h.size() % 8 != 0) h.push_back(' ');
  uint64_t n = h.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << bytes;
}

TEST_F(HfCheckpointTest, BadDtypeNamesTheTensor) {
  const std::string p = dir_.file("model.safetensors");
  WriteRaw(p, R"({"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  auto ckpt = HfCheckpoint::Open(dir_.path().string());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().message(), p + ": tensor 'x': unsupported dtype I32 (want F32, BF16, F16 or F8_E4M3)");
}

TEST_F(HfCheckpointTest, F16AndFp8BlockScales) {
  const std::string p = dir_.file("model.safetensors");
  // f16: 1.0, -2.0, 0.5 and the smallest subnormal.
  const uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x0001};
  // e4m3fn, a [2, 130] weight: two column blocks with scales 0.5 and 4.
  std::string w8(2 * 130, '\0');
  w8[0] = 0x38;         // 1.0
  w8[129] = 0x7e;       // 448, in the second column block
  w8[130] = '\x01';     // 2^-9
  w8[131] = '\xc0';     // -2.0
  const float scales[2] = {0.5f, 4.0f};
  std::string bytes(reinterpret_cast<const char*>(h), 8);
  bytes += w8;
  bytes += std::string(reinterpret_cast<const char*>(scales), 8);
  WriteRaw(p, R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
              R"("w.weight":{"dtype":"F8_E4M3","shape":[2,130],"data_offsets":[8,268]},)"
              R"("w.weight_scale_inv":{"dtype":"F32","shape":[1,2],"data_offsets":[268,276]},)"
              R"("v.weight":{"dtype":"F8_E4M3","shape":[2,130],"data_offsets":[8,268]}})",
           bytes);
  auto ckpt = HfCheckpoint::Open(dir_.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<float> v;
  ASSERT_TRUE((*ckpt)->Read("h", {4}, &v).ok());
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.0f, 0.5f, std::ldexp(1.0f, -24)}));
  ASSERT_TRUE((*ckpt)->Read("w.weight", {2, 130}, &v).ok());
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[129], 448.0f * 4.0f);
  EXPECT_EQ(v[130], std::ldexp(1.0f, -9) * 0.5f);
  EXPECT_EQ(v[131], -1.0f);
  EXPECT_EQ(v[1], 0.0f);
  auto no_scale = (*ckpt)->Read("v.weight", {2, 130}, &v);
  EXPECT_EQ(no_scale.message(), p + ": tensor 'v.weight' is F8_E4M3 but 'v.weight_scale_inv' (its block scales) is missing");
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_EQ(F8E4M3ToF32(0x08), std::ldexp(1.0f, -6));
}

TEST_F(HfCheckpointTest, NoWeightsInTheFolder) {
  auto ckpt = HfCheckpoint::Open(dir_.path().string());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("no model.safetensors or model.safetensors.index.json"));
}

TEST(HfConfigTest, UnknownModelTypeNamesConfigJsonAndField) {
  auto c = HfConfig::FromJson(R"({"model_type": "gpt2", "vocab_size": 10})", "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "m/config.json: field 'model_type' 'gpt2' is not supported (llama, qwen3, qwen3_moe, qwen2_moe, "
            "mixtral, olmoe, deepseek_v3)");
}

TEST(HfConfigTest, FieldErrorsNameTheField) {
  const std::string base =
      R"("model_type":"qwen3_moe","vocab_size":16,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,)"
      R"("intermediate_size":8,"rms_norm_eps":1e-6,"max_position_embeddings":32,"num_experts":4,)"
      R"("moe_intermediate_size":4,"head_dim":4)";
  auto missing = HfConfig::FromJson("{" + base + "}", "c.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "c.json: field 'num_experts_per_tok' is required");
  auto too_many = HfConfig::FromJson("{" + base + R"(,"num_experts_per_tok":5})", "c.json");
  EXPECT_EQ(too_many.status().message(), "c.json: field 'num_experts_per_tok' must be in [1, num_experts]");
  auto rope = HfConfig::FromJson("{" + base + R"(,"num_experts_per_tok":2,"rope_parameters":{"rope_type":"dynamic"}})",
                                 "c.json");
  EXPECT_EQ(rope.status().message(),
            "c.json: field 'rope_parameters.rope_type' 'dynamic' is not supported (default, linear, llama3, yarn)");
  auto ok = HfConfig::FromJson("{" + base + R"(,"num_experts_per_tok":2,"mlp_only_layers":[1]})", "c.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->moe_layer, (std::vector<bool>{true, false}));
  auto step = HfConfig::FromJson("{" + base + R"(,"num_experts_per_tok":2,"decoder_sparse_step":2})", "c.json");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->moe_layer, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace flotilla::inference
