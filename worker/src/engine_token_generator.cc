// TokenGenerator over inference::Engine. The engine calls the sink on its scheduler thread,
// which must never block on a slow client, so updates go through a queue and the caller's
// thread delivers them. With a GenerationGate, a sequence the engine interrupts (a weight
// switch, an offload) parks until the gate opens and then resumes from its kept KV state: the
// caller gets one outcome whose tokens run across the switch.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/generation_gate.h"
#include "flotilla/worker/token_generator.h"

namespace flotilla::worker {
namespace {

using inference::FinishReason;
using inference::GenerateUpdate;

// Updates of one call. A running update wakes the caller only when it streams: with 512
// sequences in a step, a wake per sequence per token would cost the engine's delivery thread
// a futex call each and put 512 threads on the cores beside the next forward. Otherwise the
// caller takes what has come when the call ends (interrupt, stop, error) or every kBatch.
class UpdateQueue {
 public:
  static constexpr auto kBatch = std::chrono::milliseconds(20);

  explicit UpdateQueue(bool wake_each) : wake_each_(wake_each) {}

  void Push(GenerateUpdate&& u) {
    const bool wake = wake_each_ || u.finish != FinishReason::kRunning;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(u));
    }
    if (wake) cv_.notify_one();
  }

  // Every update queued so far, in order; empty when kBatch passed with none.
  std::deque<GenerateUpdate> Take() {
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_each_) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
    } else {
      cv_.wait_for(lock, kBatch, [&] { return !queue_.empty() && queue_.back().finish != FinishReason::kRunning; });
    }
    return std::exchange(queue_, {});
  }

 private:
  const bool wake_each_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerateUpdate> queue_;
};

class EngineTokenGenerator : public TokenGenerator {
 public:
  EngineTokenGenerator(inference::Engine* engine, std::string model, std::string name, GenerationGate* gate)
      : engine_(engine), model_(std::move(model)), name_(std::move(name)), gate_(gate) {}

  absl::StatusOr<GenerationOutcome> Generate(const GenerationCall& call,
                                             const TokensCallback& on_tokens) override {
    if (gate_ == nullptr) return Run(call, on_tokens, 0);
    ASSIGN_OR_RETURN(uint64_t ticket, gate_->Enter());
    absl::StatusOr<GenerationOutcome> out = Run(call, on_tokens, ticket);
    gate_->Leave(ticket);
    return out;
  }

  void Release(const std::string& sequence_id) override {
    if (sequence_id.empty()) return;
    // One the engine no longer holds (already released, or expired) is gone as asked.
    absl::StatusOr<uint64_t> freed = engine_->Release(sequence_id);
    if (!freed.ok() && !absl::IsNotFound(freed.status())) {
      FLOG(warn, "the engine could not release a sequence",
           {{"sequence", sequence_id}, {"error", std::string(freed.status().message())}});
    }
  }

  int32_t ContextLimit() const override {
    auto config = engine_->Config(model_);
    return config.ok() ? config->max_context : 0;
  }
  std::string ModelName() const override { return name_; }

 private:
  absl::StatusOr<GenerationOutcome> Run(const GenerationCall& call, const TokensCallback& on_tokens,
                                        uint64_t ticket) {
    inference::GenerateRequest req;
    req.model = model_;
    req.sequence_id = call.sequence_id;
    req.prompt = call.new_tokens;
    req.sampling = call.sampling;
    req.keep_state = true;
    auto queue = std::make_shared<UpdateQueue>(call.stream);
    auto sink = [queue](GenerateUpdate&& u) { queue->Push(std::move(u)); };
    absl::StatusOr<std::string> started = engine_->Generate(req, sink);
    if (gate_ != nullptr) {
      if (started.ok()) {
        gate_->Started(ticket, *started);
      } else {
        gate_->StartFailed(ticket);
      }
    }
    if (!started.ok()) return started.status();
    GenerationOutcome out;
    out.sequence_id = *started;
    uint32_t call_prefilled = 0;
    while (true) {
      for (GenerateUpdate& u : queue->Take()) {
        call_prefilled = std::max(call_prefilled, u.prefilled_tokens);  // a running total per engine call
        if (gate_ != nullptr) gate_->OnTokens(ticket, u.tokens.size(), u.prefilled_tokens);
        if (!u.tokens.empty()) {
          if (on_tokens) on_tokens(u.tokens);
          out.tokens.insert(out.tokens.end(), std::make_move_iterator(u.tokens.begin()),
                            std::make_move_iterator(u.tokens.end()));
        }
        if (u.finish == FinishReason::kRunning) continue;
        if (u.finish == FinishReason::kError) {
          return absl::InternalError(absl::StrCat("engine: ", u.error));
        }
        if (u.finish == FinishReason::kInterrupted && gate_ != nullptr) {
          out.prefilled_tokens += call_prefilled;
          call_prefilled = 0;
          ASSIGN_OR_RETURN(out.sequence_id, gate_->Park(ticket));
          inference::SamplingParams rest = call.sampling;
          const auto done = static_cast<uint32_t>(out.tokens.size());
          rest.max_new_tokens = call.sampling.max_new_tokens > done ? call.sampling.max_new_tokens - done : 1;
          RETURN_IF_ERROR(engine_->Resume(out.sequence_id, rest, sink));
          gate_->Resumed();
          out.resumes += 1;
          continue;
        }
        out.prefilled_tokens += call_prefilled;
        out.finish = u.finish;
        return out;
      }
    }
  }

  inference::Engine* engine_;
  std::string model_;
  std::string name_;
  GenerationGate* gate_;
};

}  // namespace

std::unique_ptr<TokenGenerator> NewEngineTokenGenerator(inference::Engine* engine,
                                                        std::string model,
                                                        std::string display_name,
                                                        GenerationGate* gate) {
  return std::make_unique<EngineTokenGenerator>(engine, std::move(model),
                                                std::move(display_name), gate);
}

}  // namespace flotilla::worker
