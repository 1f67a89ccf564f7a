// TokenGenerator over inference::Engine. The engine calls the sink on its scheduler thread,
// which must never block on a slow client, so updates go through a queue and the caller's
// thread delivers them.
#include <condition_variable>
#include <deque>
#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/token_generator.h"

namespace flotilla::worker {
namespace {

using inference::FinishReason;
using inference::GenerateUpdate;

class UpdateQueue {
 public:
  void Push(const GenerateUpdate& u) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(u);
    cv_.notify_one();
  }
  GenerateUpdate Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    GenerateUpdate u = std::move(queue_.front());
    queue_.pop_front();
    return u;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerateUpdate> queue_;
};

class EngineTokenGenerator : public TokenGenerator {
 public:
  EngineTokenGenerator(inference::Engine* engine, std::string model, std::string name)
      : engine_(engine), model_(std::move(model)), name_(std::move(name)) {}

  absl::StatusOr<GenerationOutcome> Generate(const GenerationCall& call,
                                             const TokensCallback& on_tokens) override {
    inference::GenerateRequest req;
    req.model = model_;
    req.sequence_id = call.sequence_id;
    req.prompt = call.new_tokens;
    req.sampling = call.sampling;
    req.keep_state = true;
    auto queue = std::make_shared<UpdateQueue>();
    ASSIGN_OR_RETURN(std::string seq,
                     engine_->Generate(req, [queue](const GenerateUpdate& u) { queue->Push(u); }));
    GenerationOutcome out;
    out.sequence_id = seq;
    while (true) {
      GenerateUpdate u = queue->Pop();
      out.prefilled_tokens = std::max(out.prefilled_tokens, u.prefilled_tokens);  // a running total
      if (!u.tokens.empty()) {
        out.tokens.insert(out.tokens.end(), u.tokens.begin(), u.tokens.end());
        if (on_tokens) on_tokens(u.tokens);
      }
      if (u.finish == FinishReason::kRunning) continue;
      if (u.finish == FinishReason::kError) {
        return absl::InternalError(absl::StrCat("engine: ", u.error));
      }
      out.finish = u.finish;
      return out;
    }
  }

  void Release(const std::string& sequence_id) override {
    if (!sequence_id.empty()) (void)engine_->Release(sequence_id);
  }

  int32_t ContextLimit() const override {
    auto config = engine_->Config(model_);
    return config.ok() ? config->max_context : 0;
  }
  std::string ModelName() const override { return name_; }

 private:
  inference::Engine* engine_;
  std::string model_;
  std::string name_;
};

}  // namespace

std::unique_ptr<TokenGenerator> NewEngineTokenGenerator(inference::Engine* engine,
                                                        std::string model,
                                                        std::string display_name) {
  return std::make_unique<EngineTokenGenerator>(engine, std::move(model),
                                                std::move(display_name));
}

}  // namespace flotilla::worker
