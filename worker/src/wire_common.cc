#include "wire_common.h"

#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/ids.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/worker/hf_chat.h"

namespace flotilla::worker::wire {

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

int HttpStatusFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

absl::StatusOr<ChatReply> FailIfInterrupted(absl::StatusOr<ChatReply> reply) {
  if (!reply.ok() || reply->stop != StopKind::kInterrupted) return reply;
  return absl::UnavailableError(absl::StrCat("generation was interrupted by the engine after ",
                                             reply->completion_tokens, " tokens; the turn is incomplete, retry it"));
}

std::string NewWireId(std::string_view prefix) {
  return absl::StrCat(std::string(prefix), absl::StrFormat("%016x%08x", RandomU64(),
                                                           static_cast<uint32_t>(RandomU64())));
}

int64_t UnixSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

std::string TokenText(int32_t token, const HfChat* hf) {
  if (hf != nullptr) return SanitizeUtf8(hf->tokenizer().TokenBytes(token));
  if (token < 256) return SanitizeUtf8(std::string(1, static_cast<char>(token)));
  return std::string(inference::SpecialName(token));
}

Json TokenBytes(int32_t token, const HfChat* hf) {
  Json bytes = Json::array();
  if (hf != nullptr) {
    for (char c : hf->tokenizer().TokenBytes(token)) bytes.push_back(static_cast<uint8_t>(c));
  } else if (token < 256) {
    bytes.push_back(token);
  } else {
    for (char c : inference::SpecialName(token)) bytes.push_back(static_cast<uint8_t>(c));
  }
  return bytes;
}

Json LogprobEntries(const std::vector<TokenRecord>& tokens, uint32_t top_n, const HfChat* hf) {
  Json out = Json::array();
  for (const TokenRecord& t : tokens) {
    Json e;
    e["token"] = TokenText(t.token, hf);
    e["logprob"] = t.logprob;
    e["bytes"] = TokenBytes(t.token, hf);
    Json top = Json::array();
    for (size_t i = 0; i < t.top_ids.size() && i < top_n && i < t.top_logprobs.size(); ++i) {
      top.push_back(Json{{"token", TokenText(t.top_ids[i], hf)},
                         {"logprob", t.top_logprobs[i]},
                         {"bytes", TokenBytes(t.top_ids[i], hf)}});
    }
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<TokenRecord> ContentTokens(const std::vector<TokenRecord>& tokens, const HfChat* hf) {
  std::vector<TokenRecord> out = tokens;
  if (hf != nullptr) {
    if (!out.empty() && hf->IsStop(out.back().token)) out.pop_back();
    return out;
  }
  if (!out.empty() && (out.back().token == inference::kEndTurn || out.back().token == inference::kEos)) {
    out.pop_back();
  }
  return out;
}

void SseStream::Start() {
  if (started_) return;
  started_ = true;
  responder_.StartStream(200, "text/event-stream");
}

void SseStream::Event(const Json& data, std::string_view event_name) {
  Start();
  std::string frame;
  if (!event_name.empty()) absl::StrAppend(&frame, "event: ", std::string(event_name), "\n");
  absl::StrAppend(&frame, "data: ", Dump(data), "\n\n");
  responder_.Write(frame);
}

void SseStream::Raw(std::string_view line) {
  Start();
  responder_.Write(absl::StrCat(std::string(line), "\n\n"));
}

void SseStream::End() {
  if (started_) responder_.EndStream();
}

}  // namespace flotilla::worker::wire
