// SynthModel: the model `flotilla synth` asks for rewrites (model_rewriter.h) and problem
// statements (statement_writer.h), reached through the worker's wire API: worker::RemoteChat
// against an OpenAI-compatible base URL (POST {base}/chat/completions), or the Anthropic
// Messages API for an "anthropic+http(s)://" URL. With `--model DIR` the CLI starts the embedded
// worker serving DIR on a loopback port and points this at it; with `--model-endpoint URL` it is
// an external endpoint.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<SynthModel> m, SynthModel::Connect(options));
//   ASSIGN_OR_RETURN(ModelReply r, m->Ask(kSystemPrompt, "..."));
//
// Every exchange is bounded: timeout_ms per request, max_tokens per reply (checked by Connect,
// errors naming the option). Thread-safe (RemoteChat opens a connection per call).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/worker/remote_chat.h"

namespace flotilla::synth {

struct SynthModelOptions {
  std::string endpoint;           // base URL (http(s)://HOST[:PORT]/v1 or anthropic+...)
  std::string name;               // the endpoint's model; empty: the first GET /models lists
  uint32_t timeout_ms = 120'000;  // per request: 1 s .. 10 min
  uint32_t max_tokens = 1024;     // per reply: 16 .. 8192
  float temperature = 0.7f;
  uint64_t seed = 1;
};

struct ModelReply {
  std::string text;
  std::string finish_reason;  // "stop", "length", ...
  double seconds = 0;
};

// At most `n` bytes of a reply for a decision's reason: on one line (control characters become
// spaces), not cut inside a UTF-8 sequence, "..." when shortened.
std::string ReplyExcerpt(std::string_view text, size_t n);

class SynthModel {
 public:
  // InvalidArgument naming --model-endpoint, --model-timeout or --model-max-tokens for a bad
  // value; the endpoint's error (naming its URL) when its model list cannot be read.
  static absl::StatusOr<std::unique_ptr<SynthModel>> Connect(const SynthModelOptions& options);
  SynthModel(const SynthModel&) = delete;
  SynthModel& operator=(const SynthModel&) = delete;

  // One exchange: a system prompt and one user turn. The endpoint's error, prefixed with the
  // model's name, when the request fails or times out.
  absl::StatusOr<ModelReply> Ask(const std::string& system, const std::string& user) const;
  const std::string& name() const { return chat_->model(); }

 private:
  SynthModel(SynthModelOptions o, std::unique_ptr<worker::RemoteChat> c) : options_(std::move(o)), chat_(std::move(c)) {}
  SynthModelOptions options_;
  std::unique_ptr<worker::RemoteChat> chat_;
};

}  // namespace flotilla::synth
