#include "flotilla/inference/safetensors.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "test_model.h"
#include "testing/temp_dir.h"
#include "weights.h"

namespace flotilla::inference {
namespace {

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteAll(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

TEST(SafetensorsTest, WriteThenReadF32AndBf16) {
  flotilla::testing::TempDir dir;
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 7.0f};
  std::vector<float> b = {0.5f, 1.5f};
  ASSERT_TRUE(WriteSafetensors(dir.file("t.safetensors"),
                               {{"a", {2, 3}, a.data(), DType::kF32}, {"b", {2}, b.data(), DType::kBF16}},
                               {{"format", "flotilla"}}).ok());
  auto f = SafetensorsFile::Open(dir.file("t.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorView& ta = (*f)->tensors().at("a");
  EXPECT_EQ(ta.dtype, DType::kF32);
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta.data, a.data(), 24), 0);
  const TensorView& tb = (*f)->tensors().at("b");
  EXPECT_EQ(tb.dtype, DType::kBF16);
  uint16_t h;
  std::memcpy(&h, tb.data + 2, 2);
  EXPECT_EQ(Bf16ToF32(h), 1.5f);
  EXPECT_EQ((*f)->metadata().at("format"), "flotilla");
}

TEST(SafetensorsTest, BadFilesAreRefusedWithClearErrors) {
  flotilla::testing::TempDir dir;
  ModelConfig c = testing::TinyConfig();
  const std::string good = dir.file("good.safetensors");
  ASSERT_TRUE(testing::WriteRandomModel(good, c, 1, 0.02f).ok());
  ASSERT_TRUE(ModelWeights::Load(c, good, 1).ok());
  const std::string bytes = ReadAll(good);

  struct Case {
    std::string name;
    std::string content;
    ModelConfig config;
    std::string want;
  };
  ModelConfig wider = c;
  wider.d_model = 128;
  ModelConfig more_layers = c;
  more_layers.n_layers = 3;
  std::string bad_len = bytes;
  bad_len[7] = 0x7f;
  std::vector<Case> cases = {
      {"empty", "", c, "truncated"},
      {"truncated data", bytes.substr(0, bytes.size() - 100), c, "outside the file"},
      {"truncated header", bytes.substr(0, 64), c, "header length"},
      {"huge header length", bad_len, c, "header length"},
      {"garbage header", std::string("\x10\0\0\0\0\0\0\0{{{{{{{{{{{{{{{{", 24), c, "not a JSON object"},
      {"wrong shape", bytes, wider, "has shape"},
      {"missing tensor", bytes, more_layers, "missing tensor 'layers.2."},
  };
  for (const Case& k : cases) {
    const std::string p = dir.file("bad.safetensors");
    WriteAll(p, k.content);
    auto r = ModelWeights::Load(k.config, p, 2);
    ASSERT_FALSE(r.ok()) << k.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << k.name;
    EXPECT_NE(std::string(r.status().message()).find(k.want), std::string::npos) << k.name << ": " << r.status();
  }
  // A smaller config than the file: the extra tensors are named.
  ModelConfig fewer = c;
  fewer.n_layers = 1;
  fewer.sliding_layers = {0};
  auto r = ModelWeights::Load(fewer, good, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("unexpected tensor 'layers.1."), std::string::npos) << r.status();
  EXPECT_EQ(ModelWeights::Load(c, dir.file("absent"), 1).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace flotilla::inference
