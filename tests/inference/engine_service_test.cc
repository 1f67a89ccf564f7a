// The Engine gRPC service on loopback: streamed generation with exact records, interrupt and
// resume through the wire, scoring, info, and error codes passed through.
#include "engine_test_fixture.h"
#include "flotilla/inference/engine_service.h"
#include "grpcpp/grpcpp.h"

namespace flotilla::inference {
namespace {

class EngineServiceTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    service_ = std::make_unique<EngineService>(engine_.get(), "cpu");
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(port_, 0);
    stub_ = v1::Engine::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<EngineService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<v1::Engine::Stub> stub_;
};

TEST_F(EngineServiceTest, GenerateStreamsTheSameRecordsAsTheEngine) {
  auto direct = engine_->GenerateBlocking(Request(8, 77));
  ASSERT_TRUE(direct.ok());
  v1::GenerateRequest req;
  for (int32_t t : Request(8, 77).prompt) req.add_prompt_tokens(t);
  req.mutable_sampling()->set_temperature(0.8f);
  req.mutable_sampling()->set_seed(77);
  req.mutable_sampling()->set_max_new_tokens(8);
  req.mutable_sampling()->add_stop_tokens(-1);
  req.set_keep_state(true);
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, req);
  v1::GenerateEvent ev;
  std::vector<v1::TokenRecord> got;
  v1::GenerateEvent::Finish finish = v1::GenerateEvent::RUNNING;
  std::string id;
  while (reader->Read(&ev)) {
    for (const auto& t : ev.tokens()) got.push_back(t);
    finish = ev.finish();
    id = ev.sequence_id();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finish, v1::GenerateEvent::LENGTH);
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].token_id(), direct->tokens[i].token);
    EXPECT_EQ(got[i].logprob(), direct->tokens[i].logprob);
    EXPECT_EQ(std::vector<int32_t>(got[i].experts().begin(), got[i].experts().end()), direct->tokens[i].experts);
    EXPECT_EQ(got[i].policy_version(), 1);
  }

  // Resume the kept sequence over the wire: no prefill.
  v1::ResumeRequest rr;
  rr.set_sequence_id(id);
  rr.mutable_sampling()->set_temperature(0.8f);
  rr.mutable_sampling()->set_seed(77);
  rr.mutable_sampling()->set_max_new_tokens(3);
  rr.mutable_sampling()->add_stop_tokens(-1);
  grpc::ClientContext rctx;
  auto rreader = stub_->Resume(&rctx, rr);
  size_t resumed = 0;
  uint32_t prefilled = 99;
  while (rreader->Read(&ev)) {
    resumed += ev.tokens_size();
    prefilled = ev.prefilled_tokens();
  }
  ASSERT_TRUE(rreader->Finish().ok());
  EXPECT_EQ(resumed, 3u);
  EXPECT_EQ(prefilled, 0u);

  grpc::ClientContext ictx;
  v1::InfoResponse info;
  ASSERT_TRUE(stub_->Info(&ictx, v1::InfoRequest(), &info).ok());
  ASSERT_EQ(info.models_size(), 1);
  EXPECT_EQ(info.models(0).name(), "student");
  EXPECT_EQ(info.models(0).policy_version(), 1);
  EXPECT_EQ(info.models(0).parameters(), config_.parameter_count());

  grpc::ClientContext relctx;
  v1::SequenceRef ref;
  ref.set_sequence_id(id);
  v1::ReleaseResponse rel;
  ASSERT_TRUE(stub_->Release(&relctx, ref, &rel).ok());
  EXPECT_GT(rel.bytes_freed(), 0u);
}

TEST_F(EngineServiceTest, ScoreAndErrorsPassThrough) {
  v1::ScoreRequest sr;
  for (int32_t t : Encode("wire score")) sr.add_tokens(t);
  sr.set_top_k(2);
  sr.set_start(1);
  grpc::ClientContext ctx;
  v1::ScoreResponse resp;
  ASSERT_TRUE(stub_->Score(&ctx, sr, &resp).ok());
  auto direct = engine_->Score("", Encode("wire score"), 1, 2, false);
  ASSERT_TRUE(direct.ok());
  ASSERT_EQ(resp.logprobs_size(), static_cast<int>(direct->logprobs.size()));
  for (int i = 0; i < resp.logprobs_size(); ++i) EXPECT_EQ(resp.logprobs(i), direct->logprobs[i]);
  EXPECT_EQ(resp.top_ids_size(), 2 * resp.logprobs_size());
  EXPECT_EQ(resp.vocab(), 272u);

  grpc::ClientContext uctx;
  v1::UpdateWeightsRequest ur;
  ur.set_model("student");
  ur.set_path(dir_.file("missing.safetensors"));
  ur.set_version(9);
  v1::UpdateWeightsResponse uresp;
  EXPECT_EQ(stub_->UpdateWeights(&uctx, ur, &uresp).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext ictx;
  v1::SequenceRef ref;
  ref.set_sequence_id("nope");
  v1::InterruptResponse iresp;
  EXPECT_EQ(stub_->Interrupt(&ictx, ref, &iresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace flotilla::inference
