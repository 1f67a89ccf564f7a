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

absl::StatusOr<InJson> ParseBody(const std::string& body) {
  InJson j = InJson::parse(body, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("request body: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("request body: expected a JSON object");
  return j;
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status ReadString(const InJson& obj, const char* key, const std::string& path, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Invalid(path, "expected a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadBool(const InJson& obj, const char* key, const std::string& path, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Invalid(path, "expected true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadFloat(const InJson& obj, const char* key, const std::string& path, float lo,
                       float hi, float* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Invalid(path, "expected a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Invalid(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
  }
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status ReadUint(const InJson& obj, const char* key, const std::string& path, uint32_t lo,
                      uint32_t hi, uint32_t* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Invalid(path, "expected an integer");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Invalid(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

absl::Status ReadSeed(const InJson& obj, const char* key, const std::string& path,
                      std::optional<uint64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Invalid(path, "expected an integer");
  *out = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextContent(const InJson& v, const std::string& path,
                                            const std::vector<std::string>& text_types) {
  if (v.is_null()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return Invalid(path, "expected a string or an array of content parts");
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size(); ++i) {
    const InJson& p = v[i];
    std::string ppath = absl::StrCat(path, "[", i, "]");
    if (p.is_string()) {
      parts.push_back(p.get<std::string>());
      continue;
    }
    if (!p.is_object()) return Invalid(ppath, "expected a content part object");
    std::string type;
    if (auto st = ReadString(p, "type", ppath + ".type", &type); !st.ok()) return st;
    bool ok = false;
    for (const std::string& t : text_types) ok = ok || t == type;
    if (!ok) {
      return Invalid(ppath + ".type", absl::StrCat("unsupported content part type '", type,
                                                   "' (supported: ", absl::StrJoin(text_types, ", "), ")"));
    }
    std::string text;
    if (auto st = ReadString(p, "text", ppath + ".text", &text); !st.ok()) return st;
    parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, "\n");
}

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
