#include "flotilla/worker/chat_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/hf_tokenizer.h"
#include "flotilla/inference/reply_parser.h"
#include "nlohmann/json.hpp"
#include "worker_metrics.h"

namespace flotilla::worker {
namespace {

using inference::FinishReason;
using inference::kEndTurn;
using inference::kEos;

std::string HexId() { return absl::StrFormat("%016x", RandomU64()); }

// Streams the reply's text as tokens arrive, up to the first special token: after it the
// reply may hold a tool call, so the rest waits for the parse at the end.
class TextStreamer {
 public:
  explicit TextStreamer(ReplyObserver* observer) : observer_(observer) {}
  void OnTokens(const std::vector<TokenRecord>& tokens) {
    if (observer_ == nullptr || held_) return;
    for (const TokenRecord& t : tokens) {
      if (t.token < 256) {
        pending_bytes_.push_back(static_cast<char>(t.token));
        pending_tokens_.push_back(t);
      } else {
        held_ = true;
        break;
      }
    }
    Flush(false);
  }
  // Emits what remains of `final_text` after what was streamed; returns the wire text.
  std::string Finish(const std::string& final_text) {
    if (observer_ == nullptr) return final_text;
    if (!absl::StartsWith(final_text, streamed_)) return streamed_;
    std::string rest = final_text.substr(streamed_.size());
    if (!rest.empty()) {
      observer_->OnTextDelta(rest, pending_tokens_);
      streamed_ += rest;
    }
    return streamed_;
  }

 private:
  void Flush(bool all) {
    size_t n = all ? pending_bytes_.size() : CompleteUtf8Prefix(pending_bytes_);
    if (n == 0) return;
    std::string text = SanitizeUtf8(pending_bytes_.substr(0, n));
    std::vector<TokenRecord> toks(pending_tokens_.begin(), pending_tokens_.begin() + n);
    pending_bytes_.erase(0, n);
    pending_tokens_.erase(pending_tokens_.begin(), pending_tokens_.begin() + n);
    observer_->OnTextDelta(text, toks);
    streamed_ += text;
  }
  ReplyObserver* observer_;
  bool held_ = false;
  std::string pending_bytes_;
  std::vector<TokenRecord> pending_tokens_;
  std::string streamed_;
};

// A Hugging Face model's reply as it streams: ids decoded to text (partial UTF-8 held back),
// split by the family's reply parser into content (streamed), reasoning and tool calls (whole
// once closed). Stops reading at an end-of-reply id.
class HfReplyStreamer {
 public:
  HfReplyStreamer(const HfChat& hf, ReplyObserver* observer, const TurnPlan& plan)
      : hf_(hf), observer_(observer), decoder_(hf.tokenizer()), parser_(Options(hf, plan)) {}
  void OnTokens(const std::vector<TokenRecord>& tokens) {
    for (const TokenRecord& t : tokens) {
      if (ended_) return;
      pending_.push_back(t);
      if (hf_.IsStop(t.token)) {
        ended_ = true;
        return;
      }
      Take(parser_.Feed(decoder_.Push(t.token)));
    }
  }
  void Finish() {
    Take(parser_.Feed(decoder_.Finish()));
    Take(parser_.Finish());
  }
  const std::string& text() const { return text_; }
  std::vector<ToolCall>& tool_calls() { return calls_; }

 private:
  static inference::ReplyParserOptions Options(const HfChat& hf, const TurnPlan& plan) {
    inference::ReplyParserOptions o;
    o.format = hf.tool_format();
    o.tools = plan.tools;
    o.starts_in_reasoning = absl::EndsWith(absl::StripTrailingAsciiWhitespace(plan.generation_prompt), "<think>");
    return o;
  }
  void Take(inference::ReplyDelta d) {
    for (ToolCall& c : d.tool_calls) calls_.push_back(std::move(c));
    if (d.content.empty()) return;
    text_ += d.content;
    if (observer_ != nullptr) {
      observer_->OnTextDelta(d.content, pending_);
      pending_.clear();
    }
  }
  const HfChat& hf_;
  ReplyObserver* observer_;
  inference::HfStreamingDecoder decoder_;
  inference::ReplyParser parser_;
  bool ended_ = false;
  std::vector<TokenRecord> pending_;
  std::string text_;
  std::vector<ToolCall> calls_;
};

}  // namespace

std::string RenderToolsBlock(const std::vector<ToolSpec>& tools) {
  std::string out =
      "# Tools\nTo call a tool, write <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>."
      " Available tools, one JSON object per line:\n";
  for (const ToolSpec& t : tools) {
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["description"] = t.description;
    j["parameters"] = nlohmann::ordered_json::parse(t.parameters_json, nullptr, false);
    if (j["parameters"].is_discarded()) j["parameters"] = nlohmann::ordered_json::object();
    absl::StrAppend(&out, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "\n");
  }
  return out;
}

std::vector<ChatMessage> ChatService::PromptMessages(const ChatRequest& request) {
  std::vector<ChatMessage> out;
  if (!request.system.empty() || !request.tools.empty()) {
    ChatMessage sys;
    sys.role = ChatMessage::Role::kSystem;
    sys.content = request.system;
    if (!request.tools.empty()) {
      if (!sys.content.empty()) sys.content += "\n\n";
      sys.content += RenderToolsBlock(request.tools);
    }
    out.push_back(std::move(sys));
  }
  out.insert(out.end(), request.messages.begin(), request.messages.end());
  return out;
}

std::vector<ChatMessage> ChatService::Conversation(const ChatRequest& request) const {
  // A remote endpoint gets the tools as tools, like a Hugging Face template does.
  if (options_.hf == nullptr && options_.remote == nullptr) return PromptMessages(request);
  std::vector<ChatMessage> out;
  if (!request.system.empty()) {
    ChatMessage sys;
    sys.role = ChatMessage::Role::kSystem;
    sys.content = request.system;
    out.push_back(std::move(sys));
  }
  out.insert(out.end(), request.messages.begin(), request.messages.end());
  return out;
}

ChatService::ChatService(TokenGenerator* generator, ChatServiceOptions options)
    : generator_(generator), options_(std::move(options)) {
  if (options_.metrics == nullptr) return;
  metrics_ = std::make_unique<SessionMetrics>(*options_.metrics);
  live_sessions_ = options_.metrics->AddCollector([this](MetricsSnapshotWriter& w) {
    std::lock_guard<std::mutex> lock(mu_);
    w.Gauge("flotilla_worker_sessions_live", "Worker sessions open now", {}, static_cast<double>(sessions_.size()));
  });
}

ChatService::~ChatService() {
  live_sessions_ = MetricsRegistry::CollectorHandle();
  if (generator_ == nullptr) return;
  for (auto& [id, entry] : sessions_) {
    for (const std::string& seq : entry->session.SequenceIds()) generator_->Release(seq);
  }
}

uint32_t ChatService::CountTokens(const ChatRequest& request) const {
  if (options_.remote != nullptr) return 0;
  if (options_.hf != nullptr) {
    auto text = options_.hf->Render(Conversation(request), HfTools(request.tools), /*add_generation_prompt=*/true);
    if (!text.ok()) return 0;
    auto ids = options_.hf->Encode(*text);
    return ids.ok() ? static_cast<uint32_t>(ids->size()) : 0;
  }
  return static_cast<uint32_t>(inference::RenderConversation(PromptMessages(request), false).size());
}

std::shared_ptr<ChatService::Entry> ChatService::NewEntry(const std::string& id,
                                                          const v1::Trajectory& header) {
  auto entry = std::make_shared<Entry>(id, options_.experts_per_token, options_.hf);
  entry->header = header;
  entry->header.set_id(id);
  if (entry->header.experiment().empty()) entry->header.set_experiment(options_.experiment);
  if (entry->header.scaffold().empty()) entry->header.set_scaffold(options_.scaffold);
  if (entry->header.start_unix_ms() == 0) entry->header.set_start_unix_ms(options_.clock->WallMillis());
  sessions_[id] = entry;
  if (metrics_ != nullptr) metrics_->Opened();
  return entry;
}

std::string ChatService::OpenSession(const v1::Trajectory& header, std::string session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_id.empty()) session_id = absl::StrCat("sess-", HexId());
  NewEntry(session_id, header);
  return session_id;
}

std::shared_ptr<ChatService::Entry> ChatService::Bind(const ChatRequest& request,
                                                      std::vector<ChatMessage>* messages) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!request.session_id.empty()) {
    auto it = sessions_.find(request.session_id);
    if (it != sessions_.end()) return it->second;
    return NewEntry(request.session_id, v1::Trajectory());
  }
  if (!request.previous_response_id.empty()) {
    auto r = responses_.find(request.previous_response_id);
    if (r != responses_.end()) {
      auto s = sessions_.find(r->second.session);
      if (s != sessions_.end()) {
        std::vector<ChatMessage> full = r->second.messages;
        // The chained request carries only new input (and maybe fresh instructions).
        for (const ChatMessage& m : *messages) {
          if (m.role != ChatMessage::Role::kSystem) full.push_back(m);
        }
        *messages = std::move(full);
        return s->second;
      }
    }
  }
  std::shared_ptr<Entry> best;
  size_t best_k = 0;
  for (auto& [id, entry] : sessions_) {
    std::unique_lock<std::mutex> session_lock(entry->mu, std::try_to_lock);
    if (!session_lock.owns_lock()) continue;  // busy: a serial scaffold never is
    size_t k = entry->session.ExtendsBy(*messages);
    if (k > best_k) {
      best_k = k;
      best = entry;
    }
  }
  if (best != nullptr) return best;
  return NewEntry(absl::StrCat("sess-", HexId()), v1::Trajectory());
}

absl::StatusOr<ChatReply> ChatService::Complete(const ChatRequest& request,
                                                ReplyObserver* observer) {
  std::vector<ChatMessage> messages = Conversation(request);
  std::shared_ptr<Entry> entry = Bind(request, &messages);
  std::lock_guard<std::mutex> lock(entry->mu);
  if (options_.remote != nullptr) return GenerateRemote(*entry, request, messages, observer);
  return Generate(*entry, request, messages, observer);
}

absl::StatusOr<ChatReply> ChatService::Generate(Entry& entry, const ChatRequest& request,
                                                const std::vector<ChatMessage>& messages,
                                                ReplyObserver* observer) {
  const int64_t start_ms = options_.clock->WallMillis();
  const int64_t start_ns = options_.clock->NowNanos();
  const nlohmann::ordered_json tools = options_.hf != nullptr ? HfTools(request.tools) : nlohmann::ordered_json();
  ASSIGN_OR_RETURN(TurnPlan plan, entry.session.Plan(messages, tools, start_ms));
  const int32_t limit = generator_->ContextLimit();
  if (limit > 0 && static_cast<int64_t>(plan.context_tokens) >= limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "messages: the conversation is ", plan.context_tokens,
        " tokens, which does not fit the model's context window of ", limit, " tokens"));
  }
  inference::SamplingParams sampling;
  sampling.temperature = request.temperature;
  sampling.top_p = request.top_p;
  sampling.seed = request.seed.has_value() ? *request.seed : RandomU64();
  uint32_t room = limit > 0 ? static_cast<uint32_t>(limit) - plan.context_tokens : request.max_tokens;
  sampling.max_new_tokens = std::max<uint32_t>(1, std::min(request.max_tokens, room));
  sampling.top_logprobs = request.top_logprobs;
  if (options_.hf != nullptr) sampling.stop_tokens = options_.hf->stop_tokens();
  if (request.ignore_stop) sampling.stop_tokens = {-1};  // no token id matches
  plan.call.sampling = sampling;
  plan.call.stream = observer != nullptr;

  TextStreamer streamer(options_.hf == nullptr ? observer : nullptr);
  std::optional<HfReplyStreamer> hf_streamer;
  if (options_.hf != nullptr) hf_streamer.emplace(*options_.hf, observer, plan);
  auto on_tokens = [&](const std::vector<TokenRecord>& t) {
    if (hf_streamer.has_value()) {
      hf_streamer->OnTokens(t);
    } else {
      streamer.OnTokens(t);
    }
  };
  absl::StatusOr<GenerationOutcome> outcome = generator_->Generate(plan.call, on_tokens);
  if (!outcome.ok() && !plan.call.sequence_id.empty()) {
    // The engine no longer holds the sequence (evicted, restarted): prefill the record anew.
    FLOG(warn, "engine sequence lost; prefilling the session again",
         {{"session", entry.session.id()}, {"error", std::string(outcome.status().message())}});
    generator_->Release(plan.call.sequence_id);
    entry.session.ForgetSequence(plan);
    ASSIGN_OR_RETURN(plan, entry.session.Plan(messages, tools, start_ms));
    plan.call.sampling = sampling;
    outcome = generator_->Generate(plan.call, on_tokens);
  }
  if (!outcome.ok()) {
    entry.session.ForgetSequence(plan);
    return outcome.status();
  }

  inference::ParsedReply parsed;
  ChatReply reply;
  if (hf_streamer.has_value()) {
    hf_streamer->Finish();
    reply.text = hf_streamer->text();
    parsed.tool_calls = std::move(hf_streamer->tool_calls());
  } else {
    std::vector<int32_t> body;
    for (const TokenRecord& t : outcome->tokens) body.push_back(t.token);
    if (!body.empty() && (body.back() == kEndTurn || body.back() == kEos)) body.pop_back();
    parsed = inference::ParseAssistantReply(body);
    reply.text = streamer.Finish(SanitizeUtf8(parsed.text));
  }
  reply.id = request.reply_id.empty() ? HexId() : request.reply_id;
  reply.session_id = entry.session.id();
  for (ToolCall& c : parsed.tool_calls) {
    c.id = absl::StrCat("call_", HexId());
    reply.tool_calls.push_back(c);
  }
  reply.tokens = outcome->tokens;
  reply.completion_tokens = static_cast<uint32_t>(outcome->tokens.size());
  reply.prompt_tokens = plan.context_tokens;
  reply.reused_tokens = plan.reused_tokens;
  reply.created_unix_s = start_ms / 1000;
  if (outcome->finish == FinishReason::kLength) {
    reply.stop = StopKind::kMaxTokens;
  } else if (outcome->finish == FinishReason::kInterrupted ||
             outcome->finish == FinishReason::kCancelled) {
    reply.stop = StopKind::kInterrupted;
  } else if (!reply.tool_calls.empty()) {
    reply.stop = StopKind::kToolCalls;
  }
  if (metrics_ != nullptr) {
    metrics_->Turn(reply.prompt_tokens, reply.reused_tokens, reply.completion_tokens, reply.tool_calls.size(),
                   static_cast<double>(options_.clock->NowNanos() - start_ns) * 1e-9);
  }
  const int segment_before = plan.segment;
  entry.session.Commit(std::move(plan), *outcome, reply.text, reply.tool_calls, start_ms,
                       options_.clock->WallMillis());
  const auto& segments = entry.session.segments();
  size_t seg_index = segment_before >= 0 ? static_cast<size_t>(segment_before) : segments.size() - 1;
  RememberResponse(reply.id, entry.session.id(), segments[seg_index]);
  absl::Status saved = Save(entry);
  if (!saved.ok()) {
    FLOG(error, "saving trajectory failed", {{"session", entry.session.id()},
                                             {"error", std::string(saved.message())}});
  }
  return reply;
}

void ChatService::RememberResponse(const std::string& reply_id, const std::string& session_id,
                                   const RecordedSegment& segment) {
  std::lock_guard<std::mutex> lock(mu_);
  ResponseRef& ref = responses_[reply_id];
  ref.session = session_id;
  for (const RecordedTurn& t : segment.turns) ref.messages.push_back(t.message);
}

absl::StatusOr<ChatReply> ChatService::GenerateRemote(Entry& entry, const ChatRequest& request,
                                                      const std::vector<ChatMessage>& messages,
                                                      ReplyObserver* observer) {
  const int64_t start_ms = options_.clock->WallMillis();
  ASSIGN_OR_RETURN(RemoteReply r, options_.remote->Complete(messages, request.tools, request));
  ChatReply reply;
  reply.id = request.reply_id.empty() ? HexId() : request.reply_id;
  reply.session_id = entry.session.id();
  reply.text = SanitizeUtf8(r.text);
  for (ToolCall& c : r.tool_calls) {
    if (c.id.empty()) c.id = absl::StrCat("call_", HexId());
    reply.tool_calls.push_back(std::move(c));
  }
  reply.prompt_tokens = static_cast<uint32_t>(r.prompt_tokens);
  reply.completion_tokens = static_cast<uint32_t>(r.completion_tokens);
  reply.created_unix_s = start_ms / 1000;
  if (r.finish_reason == "length") {
    reply.stop = StopKind::kMaxTokens;
  } else if (!reply.tool_calls.empty()) {
    reply.stop = StopKind::kToolCalls;
  }
  if (observer != nullptr && !reply.text.empty()) observer->OnTextDelta(reply.text, {});
  const RecordedTurn& turn = entry.session.CommitText(messages, reply.text, reply.tool_calls, start_ms,
                                                      options_.clock->WallMillis());
  for (const RecordedSegment& seg : entry.session.segments()) {
    if (!seg.turns.empty() && &seg.turns.back() == &turn) RememberResponse(reply.id, entry.session.id(), seg);
  }
  auto& metrics = *entry.header.mutable_metrics();
  metrics[kUsagePromptTokens] += static_cast<double>(r.prompt_tokens);
  metrics[kUsageCompletionTokens] += static_cast<double>(r.completion_tokens);
  absl::Status saved = Save(entry);
  if (!saved.ok()) {
    FLOG(error, "saving trajectory failed", {{"session", entry.session.id()},
                                             {"error", std::string(saved.message())}});
  }
  return reply;
}

absl::Status ChatService::Save(Entry& entry) {
  if (options_.store == nullptr) return absl::OkStatus();
  return options_.store->Put(entry.session.ToTrajectory(entry.header));
}

absl::StatusOr<v1::Trajectory> ChatService::CloseSession(const std::string& session_id,
                                                         v1::TrajectoryStatus status,
                                                         double reward,
                                                         const std::string& detail,
                                                         v1::StopReason repercussion,
                                                         const std::map<std::string, double>& metrics) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("session '", session_id, "' not found"));
    }
    entry = it->second;
    sessions_.erase(it);
    for (auto r = responses_.begin(); r != responses_.end();) {
      r = r->second.session == session_id ? responses_.erase(r) : std::next(r);
    }
  }
  if (metrics_ != nullptr) metrics_->Closed(v1::TrajectoryStatus_Name(status));
  std::lock_guard<std::mutex> lock(entry->mu);
  entry->header.set_status(status);
  entry->header.set_reward(reward);
  entry->header.set_detail(detail);
  entry->header.set_repercussion(repercussion);
  entry->header.set_end_unix_ms(options_.clock->WallMillis());
  for (const auto& [k, v] : metrics) (*entry->header.mutable_metrics())[k] = v;
  if (generator_ != nullptr) {
    for (const std::string& seq : entry->session.SequenceIds()) generator_->Release(seq);
  }
  RETURN_IF_ERROR(Save(*entry));
  return entry->session.ToTrajectory(entry->header);
}

absl::StatusOr<v1::Trajectory> ChatService::Trajectory(const std::string& session_id) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("session '", session_id, "' not found"));
    }
    entry = it->second;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  return entry->session.ToTrajectory(entry->header);
}

}  // namespace flotilla::worker
