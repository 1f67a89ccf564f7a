// Weight loading under service: bad files are refused while the old weights keep serving;
// several models of different configs side by side.
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine_test_fixture.h"

namespace flotilla::inference {
namespace {

class EngineWeightsTest : public testing::EngineFixture {};

TEST_F(EngineWeightsTest, BadUpdatesAreRefusedAndOldWeightsKeepServing) {
  auto before = engine_->Score("student", Encode("same text"), 0, 0, false);
  ASSERT_TRUE(before.ok());
  const std::string truncated = dir_.file("trunc.safetensors");
  {
    std::ifstream in(v2_, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  ModelConfig other = config_;
  other.expert_hidden = 32;
  const std::string mismatched = dir_.file("other.safetensors");
  ASSERT_TRUE(testing::WriteRandomModel(mismatched, other, 3, 0.1f).ok());
  const std::string corrupt = dir_.file("corrupt.safetensors");
  std::ofstream(corrupt, std::ios::binary) << std::string("\x08\0\0\0\0\0\0\0nonsense", 16);

  for (const std::string& bad : {truncated, mismatched, corrupt}) {
    absl::Status s = engine_->UpdateWeights("student", bad, 7);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find(bad), std::string::npos) << s;
    EXPECT_EQ(*engine_->PolicyVersion("student"), 1);
  }
  auto after = engine_->Score("student", Encode("same text"), 0, 0, false);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->logprobs, before->logprobs);
  auto gen = engine_->GenerateBlocking(Request(3, 1));
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->tokens[0].policy_version, 1);

  ASSERT_TRUE(engine_->UpdateWeights("student", v2_, 2).ok());
  auto swapped = engine_->Score("student", Encode("same text"), 0, 0, false);
  EXPECT_NE(swapped->logprobs, before->logprobs);
}

TEST_F(EngineWeightsTest, StagedWeightsServeOnlyAfterCommit) {
  const std::vector<int32_t> text = Encode("same text");
  auto v1 = engine_->Score("student", text, 0, 0, false);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(engine_->CommitWeights("student").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->StageWeights("nobody", v2_, 2).code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(engine_->StageWeights("student", v2_, 2).ok());
  // Staged weights change nothing until the commit.
  EXPECT_EQ(engine_->Score("student", text, 0, 0, false)->logprobs, v1->logprobs);
  EXPECT_EQ(*engine_->PolicyVersion("student"), 1);
  auto gen = engine_->GenerateBlocking(Request(3, 1));
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->tokens[0].policy_version, 1);
  // A bad file staged later is refused and leaves the staged weights as they were.
  const std::string corrupt = dir_.file("corrupt.safetensors");
  std::ofstream(corrupt, std::ios::binary) << std::string("\x08\0\0\0\0\0\0\0nonsense", 16);
  EXPECT_EQ(engine_->StageWeights("student", corrupt, 9).code(), absl::StatusCode::kInvalidArgument);

  auto committed = engine_->CommitWeights("student");
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(*committed, 2);
  EXPECT_EQ(*engine_->PolicyVersion("student"), 2);
  auto v2 = engine_->Score("student", text, 0, 0, false);
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(v2->logprobs, v1->logprobs);
  EXPECT_EQ(engine_->CommitWeights("student").status().code(), absl::StatusCode::kFailedPrecondition);

  // The same files through UpdateWeights (stage and commit in one call) give the same scores.
  ASSERT_TRUE(engine_->UpdateWeights("student", v1_, 3).ok());
  EXPECT_EQ(engine_->Score("student", text, 0, 0, false)->logprobs, v1->logprobs);
  ASSERT_TRUE(engine_->UpdateWeights("student", v2_, 4).ok());
  EXPECT_EQ(engine_->Score("student", text, 0, 0, false)->logprobs, v2->logprobs);
  EXPECT_EQ(*engine_->PolicyVersion("student"), 4);
}

TEST_F(EngineWeightsTest, NonFiniteValuesAreRefusedWithTheirPlace) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    ModelWeights w = *ModelWeights::Random(config_, 8, 0.1f, 0);
    std::vector<TensorToWrite> out;
    for (const TensorSlot& slot : TensorSlots(w)) {
      if (slot.name == "layers.1.attn.wo") (*slot.dst)[5] = std::numeric_limits<float>::infinity();
      out.push_back({slot.name, slot.shape, slot.dst->data(), dtype});
    }
    const std::string path = dir_.file(absl::StrCat("inf", DTypeName(dtype), ".safetensors"));
    ASSERT_TRUE(WriteSafetensors(path, out).ok());
    absl::Status s = engine_->StageWeights("student", path, 3);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), absl::StrCat(path, ": tensor 'layers.1.attn.wo' has a non-finite value at index 5"));
    EXPECT_EQ(engine_->CommitWeights("student").status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(*engine_->PolicyVersion("student"), 1);
  }
}

TEST_F(EngineWeightsTest, StagingRunsWhileASequenceGenerates) {
  GenerateRequest req = Request(400, 5);
  testing::Collected out;
  ASSERT_TRUE(engine_->Generate(req, out.Sink()).ok());
  ASSERT_TRUE(engine_->StageWeights("student", v2_, 2).ok());
  out.done.WaitForNotification();
  ASSERT_EQ(out.tokens.size(), 400u);
  for (const TokenRecord& t : out.tokens) EXPECT_EQ(t.policy_version, 1);
  ASSERT_EQ(*engine_->CommitWeights("student"), 2);
  auto after = engine_->GenerateBlocking(Request(2, 5));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->tokens[0].policy_version, 2);
}

TEST_F(EngineWeightsTest, StudentAndTeachersOfDifferentConfigsServeTogether) {
  ModelConfig big = config_;
  big.n_layers = 3;
  big.n_experts = 6;
  big.top_k = 3;
  big.sliding_layers = {};
  big.sliding_window = 0;
  const std::string tpath = dir_.file("teacher.safetensors");
  ASSERT_TRUE(testing::WriteRandomModel(tpath, big, 4, 0.1f).ok());
  ASSERT_TRUE(engine_->LoadModel("teacher", big, tpath, 40).ok());
  EXPECT_EQ(engine_->LoadModel("teacher", config_, tpath, 41).code(), absl::StatusCode::kInvalidArgument);

  GenerateRequest req = Request(6, 2);
  req.model = "teacher";
  auto t = engine_->GenerateBlocking(req);
  auto s = engine_->GenerateBlocking(Request(6, 2));
  ASSERT_TRUE(t.ok() && s.ok());
  EXPECT_EQ(t->tokens[0].experts.size(), 9u);
  EXPECT_EQ(t->tokens[0].policy_version, 40);
  EXPECT_EQ(s->tokens[0].experts.size(), 4u);
  EXPECT_EQ(s->tokens[0].policy_version, 1);
  std::vector<int32_t> sample = Encode("score me");
  auto sc = engine_->Score("teacher", sample, 1, 2, true);
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ(sc->logprobs.size(), sample.size() - 1);
  EXPECT_EQ(sc->full_logprobs.size(), (sample.size() - 1) * big.vocab_size);
  EXPECT_EQ(engine_->Score("nobody", sample, 0, 0, false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->Config("teacher")->n_layers, 3);
}

TEST_F(EngineWeightsTest, BadRequestsGetClearErrors) {
  GenerateRequest req = Request(3, 1);
  req.prompt = {5, 9999};
  auto r = engine_->Generate(req, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  req.prompt = {};
  EXPECT_EQ(engine_->Generate(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req.prompt = {1};
  req.model = "missing";
  EXPECT_EQ(engine_->Generate(req, nullptr).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->Interrupt("nope").status().code(), absl::StatusCode::kNotFound);
  EngineOptions bad;
  bad.backend = "tpu";
  EXPECT_EQ(Engine::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::inference
