#include "synth_model.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::synth {

std::string ReplyExcerpt(std::string_view text, size_t n) {
  size_t cut = std::min(n, text.size());
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out(text.substr(0, cut));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return cut < text.size() ? out + "..." : out;
}

absl::StatusOr<std::unique_ptr<SynthModel>> SynthModel::Connect(const SynthModelOptions& options) {
  if (!worker::IsEndpointUrl(options.endpoint)) {
    return absl::InvalidArgumentError(absl::StrCat("--model-endpoint '", options.endpoint,
                                                   "': not an http(s):// or anthropic+http(s):// base URL"));
  }
  if (options.timeout_ms < 1000 || options.timeout_ms > 600'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-timeout ", options.timeout_ms / 1000.0, ": must be 1 to 600 seconds"));
  }
  if (options.max_tokens < 16 || options.max_tokens > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("--model-max-tokens ", options.max_tokens, ": must be 16 to 8192"));
  }
  worker::RemoteChatOptions ro;
  ro.base_url = options.endpoint;
  ro.model = options.name;
  ro.timeout_ms = options.timeout_ms;
  auto chat = worker::RemoteChat::Create(ro);
  if (!chat.ok()) {
    return absl::Status(chat.status().code(), absl::StrCat("--model-endpoint: ", chat.status().message()));
  }
  return std::unique_ptr<SynthModel>(new SynthModel(options, std::move(*chat)));
}

absl::StatusOr<ModelReply> SynthModel::Ask(const std::string& system, const std::string& user) const {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<worker::ChatMessage> messages(2);
  messages[0].role = worker::ChatMessage::Role::kSystem;
  messages[0].content = system;
  messages[1].role = worker::ChatMessage::Role::kUser;
  messages[1].content = user;
  worker::ChatRequest params;
  params.max_tokens = options_.max_tokens;
  params.temperature = options_.temperature;
  params.seed = options_.seed;
  auto reply = chat_->Complete(messages, {}, params);
  if (!reply.ok()) {
    return absl::Status(reply.status().code(), absl::StrCat("model ", name(), ": ", reply.status().message()));
  }
  ModelReply r;
  r.text = reply->text;
  r.finish_reason = reply->finish_reason;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace flotilla::synth
