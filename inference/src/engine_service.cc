#include "flotilla/inference/engine_service.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace flotilla::inference {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

SamplingParams FromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  s.temperature = p.temperature();
  s.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  s.seed = p.seed();
  if (p.max_new_tokens() > 0) s.max_new_tokens = p.max_new_tokens();
  s.stop_tokens.assign(p.stop_tokens().begin(), p.stop_tokens().end());
  s.top_logprobs = p.top_logprobs();
  return s;
}

v1::GenerateEvent::Finish FinishToProto(FinishReason f) {
  switch (f) {
    case FinishReason::kRunning: return v1::GenerateEvent::RUNNING;
    case FinishReason::kStop: return v1::GenerateEvent::STOP;
    case FinishReason::kLength: return v1::GenerateEvent::LENGTH;
    case FinishReason::kInterrupted: return v1::GenerateEvent::INTERRUPTED;
    case FinishReason::kCancelled: return v1::GenerateEvent::CANCELLED;
    case FinishReason::kError: return v1::GenerateEvent::ERROR;
  }
  return v1::GenerateEvent::ERROR;
}

// Updates from the engine's scheduler thread, handed to the handler thread that writes them.
class UpdateQueue {
 public:
  void Push(GenerateUpdate&& u) {
    std::lock_guard<std::mutex> l(mu_);
    q_.push_back(std::move(u));
    cv_.notify_one();
  }
  bool PopFor(GenerateUpdate* out, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, wait, [&] { return !q_.empty(); })) return false;
    *out = std::move(q_.front());
    q_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerateUpdate> q_;
};

grpc::Status Pump(Engine* engine, grpc::ServerContext* ctx, const std::string& id, uint32_t prompt_tokens,
                  UpdateQueue* q, grpc::ServerWriter<v1::GenerateEvent>* writer) {
  bool interrupted = false;
  bool first = true;
  for (;;) {
    GenerateUpdate u;
    if (!q->PopFor(&u, std::chrono::milliseconds(50))) {
      if (ctx->IsCancelled() && !interrupted) {
        interrupted = true;
        (void)engine->Interrupt(id);
      }
      continue;
    }
    v1::GenerateEvent ev;
    ev.set_sequence_id(u.sequence_id);
    for (const TokenRecord& t : u.tokens) {
      v1::TokenRecord* r = ev.add_tokens();
      r->set_token_id(t.token);
      r->set_logprob(t.logprob);
      r->set_policy_version(t.policy_version);
      r->mutable_experts()->Add(t.experts.begin(), t.experts.end());
      r->mutable_top_ids()->Add(t.top_ids.begin(), t.top_ids.end());
      r->mutable_top_logprobs()->Add(t.top_logprobs.begin(), t.top_logprobs.end());
    }
    ev.set_finish(FinishToProto(u.finish));
    if (first) ev.set_prompt_tokens(prompt_tokens);
    first = false;
    ev.set_prefilled_tokens(u.prefilled_tokens);
    ev.set_error(u.error);
    if (!interrupted && !writer->Write(ev)) {
      interrupted = true;
      (void)engine->Interrupt(id);
    }
    if (u.finish != FinishReason::kRunning) return grpc::Status::OK;
  }
}

}  // namespace

grpc::Status EngineService::Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                                     grpc::ServerWriter<v1::GenerateEvent>* writer) {
  GenerateRequest r;
  r.model = req->model();
  r.sequence_id = req->sequence_id();
  r.prompt.assign(req->prompt_tokens().begin(), req->prompt_tokens().end());
  r.sampling = FromProto(req->sampling());
  r.keep_state = req->keep_state();
  auto q = std::make_shared<UpdateQueue>();
  auto id = engine_->Generate(r, [q](GenerateUpdate&& u) { q->Push(std::move(u)); });
  if (!id.ok()) return ToGrpc(id.status());
  return Pump(engine_, ctx, *id, static_cast<uint32_t>(r.prompt.size()), q.get(), writer);
}

grpc::Status EngineService::Interrupt(grpc::ServerContext*, const v1::SequenceRef* req,
                                      v1::InterruptResponse* resp) {
  auto n = engine_->Interrupt(req->sequence_id());
  if (!n.ok()) return ToGrpc(n.status());
  resp->set_generated_tokens(*n);
  return grpc::Status::OK;
}

grpc::Status EngineService::Resume(grpc::ServerContext* ctx, const v1::ResumeRequest* req,
                                   grpc::ServerWriter<v1::GenerateEvent>* writer) {
  auto q = std::make_shared<UpdateQueue>();
  absl::Status s = engine_->Resume(req->sequence_id(), FromProto(req->sampling()),
                                   [q](GenerateUpdate&& u) { q->Push(std::move(u)); });
  if (!s.ok()) return ToGrpc(s);
  return Pump(engine_, ctx, req->sequence_id(), 0, q.get(), writer);
}

grpc::Status EngineService::SaveState(grpc::ServerContext*, const v1::SaveStateRequest* req,
                                      v1::SaveStateResponse* resp) {
  auto h = engine_->SaveState(req->sequence_id(), req->tier() == v1::SaveStateRequest::FILE, req->ttl_ms());
  if (!h.ok()) return ToGrpc(h.status());
  resp->set_handle(*h);
  return grpc::Status::OK;
}

grpc::Status EngineService::LoadState(grpc::ServerContext*, const v1::LoadStateRequest* req,
                                      v1::LoadStateResponse* resp) {
  auto id = engine_->LoadState(req->handle());
  if (!id.ok()) return ToGrpc(id.status());
  resp->set_sequence_id(*id);
  return grpc::Status::OK;
}

grpc::Status EngineService::Release(grpc::ServerContext*, const v1::SequenceRef* req,
                                    v1::ReleaseResponse* resp) {
  auto b = engine_->Release(req->sequence_id());
  if (!b.ok()) return ToGrpc(b.status());
  resp->set_bytes_freed(*b);
  return grpc::Status::OK;
}

grpc::Status EngineService::UpdateWeights(grpc::ServerContext*, const v1::UpdateWeightsRequest* req,
                                          v1::UpdateWeightsResponse* resp) {
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = engine_->UpdateWeights(req->model(), req->path(), req->version());
  if (!s.ok()) return ToGrpc(s);
  resp->set_version(req->version());
  resp->set_swap_ms(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return grpc::Status::OK;
}

grpc::Status EngineService::Score(grpc::ServerContext*, const v1::ScoreRequest* req,
                                  v1::ScoreResponse* resp) {
  std::vector<int32_t> tokens(req->tokens().begin(), req->tokens().end());
  auto r = engine_->Score(req->model(), tokens, req->start(), req->top_k(), req->full_vocab());
  if (!r.ok()) return ToGrpc(r.status());
  auto config = engine_->Config(req->model());
  resp->mutable_logprobs()->Add(r->logprobs.begin(), r->logprobs.end());
  resp->mutable_top_ids()->Add(r->top_ids.begin(), r->top_ids.end());
  resp->mutable_top_logprobs()->Add(r->top_logprobs.begin(), r->top_logprobs.end());
  resp->mutable_full_logprobs()->Add(r->full_logprobs.begin(), r->full_logprobs.end());
  if (config.ok()) resp->set_vocab(static_cast<uint32_t>(config->vocab_size));
  return grpc::Status::OK;
}

grpc::Status EngineService::Info(grpc::ServerContext*, const v1::InfoRequest*, v1::InfoResponse* resp) {
  for (const std::string& name : engine_->ModelNames()) {
    auto config = engine_->Config(name);
    auto version = engine_->PolicyVersion(name);
    if (!config.ok() || !version.ok()) continue;
    v1::ModelInfo* m = resp->add_models();
    m->set_name(name);
    m->set_policy_version(*version);
    m->set_config_json(config->ToJson());
    m->set_backend(backend_);
    m->set_parameters(config->parameter_count());
  }
  EngineStats s = engine_->Stats();
  resp->set_active_sequences(s.active_sequences);
  resp->set_kv_pages_used(s.kv_pages_used);
  resp->set_kv_pages_total(s.kv_pages_total);
  resp->set_prefill_tokens_total(s.prefill_tokens);
  resp->set_decode_tokens_total(s.decode_tokens);
  return grpc::Status::OK;
}

}  // namespace flotilla::inference
