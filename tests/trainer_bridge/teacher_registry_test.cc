// TeacherRegistry with 42 teachers, each a model of its own config served by one engine: every
// dataset's samples are scored by the teacher mapped to it (checked against that model's own
// Score), full vocabulary or top-k as configured, and the active set changes mid-run.
#include "flotilla/trainer_bridge/teacher_registry.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "inference/test_model.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr int kTeachers = 42;

inference::ModelConfig TeacherModel(int i) {
  inference::ModelConfig c;
  c.n_layers = 1 + i % 2;
  c.d_model = 32 + 16 * (i % 3);
  c.n_heads = 2;
  c.n_kv_heads = 1 + i % 2;
  c.head_dim = 16;
  c.n_experts = 2 + 2 * (i % 2);
  c.top_k = 1 + i % 2;
  c.expert_hidden = 32;
  c.max_context = 128;
  return c;
}

class TeacherRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inference::EngineOptions eo;
    eo.threads = 1;
    auto e = inference::Engine::Create(eo);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    for (int i = 0; i < kTeachers; ++i) {
      TeacherConfig t;
      t.name = absl::StrCat("t", i);
      t.model_config = dir_.file(t.name + ".json");
      t.weights = dir_.file(t.name + ".safetensors");
      std::ofstream(t.model_config) << TeacherModel(i).ToJson();
      ASSERT_TRUE(inference::testing::WriteRandomModel(t.weights, TeacherModel(i), 100 + i, 0.3f).ok());
      t.domains = {absl::StrCat("domain", i)};
      if (i % 3 == 2) {  // every third teacher gives the top 5 only
        t.full_vocab = false;
        t.top_k = 5;
      }
      teachers_.push_back(t);
      datasets_.push_back(DatasetConfig{absl::StrCat("d", i), "builtin:copy", absl::StrCat("domain", i), 1, 0});
    }
  }

  // A sample of `dataset`: 6 prompt positions (version -1) and 5 generated ones.
  static v1::Sample MakeSample(const std::string& dataset) {
    v1::Sample s;
    s.set_dataset(dataset);
    s.set_trajectory_id("traj-" + dataset);
    for (int32_t id : {256, 72, 105, 33, 10, 259, 49, 50, 51, 52, 257}) s.add_ids(id);
    for (int i = 0; i < 11; ++i) s.add_policy_versions(i < 6 ? -1 : 3);
    return s;
  }

  testing::TempDir dir_;
  std::unique_ptr<inference::Engine> engine_;
  std::vector<TeacherConfig> teachers_;
  std::vector<DatasetConfig> datasets_;
};

TEST_F(TeacherRegistryTest, FortyTwoTeachersEachScoreTheirOwnDataset) {
  TeacherRegistry registry(teachers_, datasets_);
  ASSERT_EQ(registry.size(), static_cast<size_t>(kTeachers));
  for (int i = 0; i < kTeachers; ++i) {
    v1::Sample s = MakeSample(absl::StrCat("d", i));
    ASSERT_TRUE(registry.Score(*engine_, &s).ok()) << i;
    EXPECT_EQ(s.teacher(), absl::StrCat("t", i));
    // Exactly what that teacher's own model says about the generated positions.
    const std::vector<int32_t> ids(s.ids().begin(), s.ids().end());
    const bool full = teachers_[i].full_vocab;
    auto want = engine_->Score(TeacherRegistry::ModelName(s.teacher()), ids, 6, full ? 0 : 5, full);
    ASSERT_TRUE(want.ok()) << want.status();
    if (full) {
      EXPECT_EQ(s.teacher_width(), 272u);
      EXPECT_EQ(s.teacher_ids_size(), 0);
      ASSERT_EQ(static_cast<size_t>(s.teacher_logprobs_size()), 5u * 272);
      for (int p = 0; p < 5; ++p) {
        double mass = 0;
        for (int v = 0; v < 272; ++v) mass += std::exp(s.teacher_logprobs(p * 272 + v));
        EXPECT_NEAR(mass, 1.0, 1e-3) << "teacher " << i << " position " << p;
      }
      EXPECT_EQ(std::vector<float>(s.teacher_logprobs().begin(), s.teacher_logprobs().end()), want->full_logprobs);
    } else {
      EXPECT_EQ(s.teacher_width(), 5u);
      EXPECT_EQ(std::vector<int32_t>(s.teacher_ids().begin(), s.teacher_ids().end()), want->top_ids);
      EXPECT_EQ(std::vector<float>(s.teacher_logprobs().begin(), s.teacher_logprobs().end()), want->top_logprobs);
    }
  }
  // Teachers of different configs really differ: two of them disagree on the same sample.
  v1::Sample a = MakeSample("d0"), b = MakeSample("d3");
  ASSERT_TRUE(registry.Score(*engine_, &a).ok());
  ASSERT_TRUE(registry.Score(*engine_, &b).ok());
  EXPECT_NE(std::vector<float>(a.teacher_logprobs().begin(), a.teacher_logprobs().end()),
            std::vector<float>(b.teacher_logprobs().begin(), b.teacher_logprobs().end()));
}

TEST_F(TeacherRegistryTest, ActiveSetChangesWhileScoring) {
  // Teacher 41 also covers domain0, after teacher 0 in config order.
  teachers_[41].domains.push_back("domain0");
  TeacherRegistry registry(teachers_, datasets_);
  v1::Sample before = MakeSample("d0");
  ASSERT_TRUE(registry.Score(*engine_, &before).ok());
  EXPECT_EQ(before.teacher(), "t0");
  std::vector<std::string> active;
  for (int i = 1; i < kTeachers; ++i) active.push_back(absl::StrCat("t", i));
  ASSERT_TRUE(registry.SetActive(active).ok());
  v1::Sample after = MakeSample("d0");
  ASSERT_TRUE(registry.Score(*engine_, &after).ok());
  EXPECT_EQ(after.teacher(), "t41");
  EXPECT_EQ(before.teacher(), "t0");  // a sample scored before keeps its teacher
  // An unknown name changes nothing; a dataset with no active teacher is NotFound.
  EXPECT_EQ(registry.SetActive({"t1", "nobody"}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Active().size(), static_cast<size_t>(kTeachers - 1));
  ASSERT_TRUE(registry.SetActive({"t5"}).ok());
  v1::Sample orphan = MakeSample("d7");
  EXPECT_EQ(registry.Score(*engine_, &orphan).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
