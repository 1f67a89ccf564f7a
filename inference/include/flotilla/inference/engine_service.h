// The flotilla.v1.Engine gRPC service (common/proto/inference.proto) over an Engine.
//
// Generate and Resume stream one event per engine delivery and end when the sequence stops;
// a client that cancels a stream interrupts its sequence (the state is kept). Thread-safe:
// gRPC calls handlers from its own threads and the Engine is thread-safe. The service does not
// own the engine, which must outlive it.
#pragma once

#include <memory>
#include <string>

#include "flotilla/inference/engine.h"
#include "flotilla/proto/inference.grpc.pb.h"

namespace flotilla::inference {

class EngineService final : public flotilla::v1::Engine::Service {
 public:
  EngineService(Engine* engine, std::string backend) : engine_(engine), backend_(std::move(backend)) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override;
  grpc::Status Interrupt(grpc::ServerContext* ctx, const v1::SequenceRef* req,
                         v1::InterruptResponse* resp) override;
  grpc::Status Resume(grpc::ServerContext* ctx, const v1::ResumeRequest* req,
                      grpc::ServerWriter<v1::GenerateEvent>* writer) override;
  grpc::Status SaveState(grpc::ServerContext* ctx, const v1::SaveStateRequest* req,
                         v1::SaveStateResponse* resp) override;
  grpc::Status LoadState(grpc::ServerContext* ctx, const v1::LoadStateRequest* req,
                         v1::LoadStateResponse* resp) override;
  grpc::Status Release(grpc::ServerContext* ctx, const v1::SequenceRef* req,
                       v1::ReleaseResponse* resp) override;
  grpc::Status UpdateWeights(grpc::ServerContext* ctx, const v1::UpdateWeightsRequest* req,
                             v1::UpdateWeightsResponse* resp) override;
  grpc::Status Score(grpc::ServerContext* ctx, const v1::ScoreRequest* req,
                     v1::ScoreResponse* resp) override;
  grpc::Status Info(grpc::ServerContext* ctx, const v1::InfoRequest* req,
                    v1::InfoResponse* resp) override;

 private:
  Engine* engine_;
  std::string backend_;
};

}  // namespace flotilla::inference
