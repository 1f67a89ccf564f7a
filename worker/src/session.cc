#include "flotilla/worker/session.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "flotilla/worker/token_span.h"
#include "nlohmann/json.hpp"
#include "session_internal.h"

namespace flotilla::worker {
namespace {

using inference::kAssistant;
using inference::kBos;
using inference::kEndTurn;

std::string Trimmed(const std::string& s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

// Tool-call arguments are compared as JSON values: clients re-serialize them (key order,
// spacing) and that must not break the match.
bool SameArguments(const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto ja = nlohmann::json::parse(a, nullptr, false);
  auto jb = nlohmann::json::parse(b, nullptr, false);
  if (ja.is_discarded() || jb.is_discarded()) return false;
  return ja == jb;
}

v1::Turn::Role ProtoRole(ChatMessage::Role r) {
  switch (r) {
    case ChatMessage::Role::kSystem: return v1::Turn::SYSTEM;
    case ChatMessage::Role::kUser: return v1::Turn::USER;
    case ChatMessage::Role::kAssistant: return v1::Turn::ASSISTANT;
    case ChatMessage::Role::kTool: return v1::Turn::TOOL;
  }
  return v1::Turn::ROLE_UNSPECIFIED;
}

}  // namespace

// Rules: roles must agree; a tool result must answer the same call; text must be equal,
// except that an assistant reply the model generated is compared with surrounding whitespace
// trimmed (clients strip it); tool calls must agree in name, arguments (as JSON) and id
// (when the client sends one).
bool SameMessage(const ChatMessage& incoming, const RecordedTurn& recorded) {
  const ChatMessage& r = recorded.message;
  if (incoming.role != r.role) return false;
  if (incoming.tool_call_id != r.tool_call_id) return false;
  if (recorded.generated) {
    if (Trimmed(incoming.content) != Trimmed(r.content)) return false;
  } else if (incoming.content != r.content) {
    return false;
  }
  if (incoming.tool_calls.size() != r.tool_calls.size()) return false;
  for (size_t i = 0; i < r.tool_calls.size(); ++i) {
    const ToolCall& a = incoming.tool_calls[i];
    const ToolCall& b = r.tool_calls[i];
    if (a.name != b.name || !SameArguments(a.arguments_json, b.arguments_json)) return false;
    if (!a.id.empty() && a.id != b.id) return false;
  }
  return true;
}

size_t RecordedSegment::TokenCount() const {
  size_t n = 0;
  for (const RecordedTurn& t : turns) n += t.tokens.ids_size();
  return n;
}

std::vector<int32_t> RecordedSegment::TokenIds() const {
  std::vector<int32_t> ids;
  for (const RecordedTurn& t : turns) ids.insert(ids.end(), t.tokens.ids().begin(), t.tokens.ids().end());
  return ids;
}

Session::Session(std::string id, int32_t experts_per_token, const HfChat* hf)
    : id_(std::move(id)), experts_per_token_(experts_per_token), hf_(hf) {}

std::string NewSegmentReason(bool first_segment, size_t partial_k, size_t messages) {
  if (first_segment) return "start";
  if (partial_k == 0) return "new-conversation";
  if (partial_k == messages) return "history-truncated";
  return "history-rewritten";
}

void StartFromTurns(const RecordedSegment& source, int source_index, size_t kept, TurnPlan* plan,
                    std::vector<int32_t>* context) {
  if (kept == 0) return;
  plan->source_segment = source_index;
  plan->kept_turns = kept;
  for (size_t i = 0; i < kept; ++i) {
    const auto& ids = source.turns[i].tokens.ids();
    context->insert(context->end(), ids.begin(), ids.end());
  }
}

size_t CommonPrefix(const RecordedSegment& seg, const std::vector<ChatMessage>& messages) {
  size_t k = 0;
  while (k < seg.turns.size() && k < messages.size() && SameMessage(messages[k], seg.turns[k])) ++k;
  return k;
}

size_t Session::ExtendsBy(const std::vector<ChatMessage>& messages) const {
  size_t best = 0;
  for (const RecordedSegment& seg : segments_) {
    size_t k = CommonPrefix(seg, messages);
    if (k == seg.turns.size() && messages.size() > k) best = std::max(best, k);
  }
  return best;
}

absl::StatusOr<TurnPlan> Session::Plan(const std::vector<ChatMessage>& messages,
                                       const nlohmann::ordered_json& tools, int64_t now_unix_ms) const {
  if (hf_ != nullptr) return PlanHf(messages, tools, now_unix_ms);
  return PlanBytes(messages, now_unix_ms);
}

TurnPlan Session::PlanBytes(const std::vector<ChatMessage>& messages, int64_t now_unix_ms) const {
  TurnPlan plan;
  int best = -1, partial = -1;
  size_t best_k = 0, partial_k = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    size_t k = CommonPrefix(segments_[s], messages);
    if (k == segments_[s].turns.size() && messages.size() > k && (best < 0 || k > best_k)) {
      best = static_cast<int>(s);
      best_k = k;
    }
    if (k > partial_k || partial < 0) {
      partial = static_cast<int>(s);
      partial_k = k;
    }
  }
  size_t first_new = 0;
  std::vector<int32_t> context;  // tokens before the new turns
  if (best >= 0) {
    plan.segment = best;
    first_new = best_k;
    context = segments_[best].TokenIds();
  } else {
    plan.new_segment_reason = NewSegmentReason(segments_.empty(), partial_k, messages.size());
    if (partial_k > 0) StartFromTurns(segments_[partial], partial, partial_k, &plan, &context);
    first_new = partial_k;
  }
  plan.reused_tokens = static_cast<uint32_t>(context.size());
  for (size_t i = first_new; i < messages.size(); ++i) {
    RecordedTurn turn;
    turn.message = messages[i];
    std::vector<int32_t> ids;
    if (context.empty() && i == first_new) ids.push_back(kBos);
    std::vector<int32_t> body = inference::RenderMessage(messages[i]);
    ids.insert(ids.end(), body.begin(), body.end());
    AppendContextTokens(&turn.tokens, ids);
    turn.tokens.set_experts_per_token(experts_per_token_);
    turn.start_unix_ms = turn.end_unix_ms = now_unix_ms;
    context.insert(context.end(), ids.begin(), ids.end());
    plan.new_turns.push_back(std::move(turn));
  }
  if (context.empty()) context.push_back(kBos);  // no messages at all: generate after <bos>
  context.push_back(kAssistant);
  plan.context_tokens = static_cast<uint32_t>(context.size());
  const RecordedSegment* seg = best >= 0 ? &segments_[best] : nullptr;
  if (seg != nullptr && !seg->sequence_id.empty() && seg->engine_tokens <= context.size()) {
    plan.call.sequence_id = seg->sequence_id;
    plan.call.new_tokens.assign(context.begin() + seg->engine_tokens, context.end());
  } else {
    plan.call.new_tokens = std::move(context);
  }
  return plan;
}

const RecordedTurn& Session::Commit(TurnPlan plan, const GenerationOutcome& outcome,
                                    std::string wire_text, std::vector<ToolCall> tool_calls,
                                    int64_t start_unix_ms, int64_t end_unix_ms) {
  RecordedSegment* seg;
  if (plan.segment < 0) {
    RecordedSegment fresh;
    fresh.reason = plan.new_segment_reason;
    if (plan.source_segment >= 0) {
      const auto& src = segments_[plan.source_segment].turns;
      fresh.turns.assign(src.begin(), src.begin() + plan.kept_turns);
    }
    segments_.push_back(std::move(fresh));
    seg = &segments_.back();
  } else {
    seg = &segments_[plan.segment];
  }
  for (RecordedTurn& t : plan.new_turns) seg->turns.push_back(std::move(t));
  if (seg->turns.empty() && plan.call.new_tokens.size() == 2) {
    // A conversation with no messages: <bos> belongs to the reply's turn.
  }
  const size_t before = seg->TokenCount();
  RecordedTurn reply;
  reply.generated = true;
  reply.message.role = ChatMessage::Role::kAssistant;
  reply.message.content = std::move(wire_text);
  reply.message.tool_calls = std::move(tool_calls);
  reply.start_unix_ms = start_unix_ms;
  reply.end_unix_ms = end_unix_ms;
  v1::TokenSpan& span = reply.tokens;
  span.set_experts_per_token(experts_per_token_);
  std::vector<int32_t> head = plan.reply_head;
  if (hf_ == nullptr) {
    if (before == 0) head.push_back(kBos);
    head.push_back(kAssistant);
  }
  AppendContextTokens(&span, head);
  AppendGeneratedTokens(&span, outcome.tokens);
  const size_t engine_tokens = before + head.size() + outcome.tokens.size();
  if (hf_ != nullptr) {
    CloseHfReply(plan, outcome, seg, &reply);
  } else if (outcome.tokens.empty() || outcome.tokens.back().token != kEndTurn) {
    // Stopped by length, <eos> or an interrupt: the template still closes the turn.
    AppendContextTokens(&span, {kEndTurn});
  }
  seg->turns.push_back(std::move(reply));
  seg->sequence_id = outcome.sequence_id;
  seg->engine_tokens = engine_tokens;
  return seg->turns.back();
}

void Session::ForgetSequence(const TurnPlan& plan) {
  if (plan.segment < 0) return;
  segments_[plan.segment].sequence_id.clear();
  segments_[plan.segment].engine_tokens = 0;
}

std::vector<std::string> Session::SequenceIds() const {
  std::vector<std::string> ids;
  for (const RecordedSegment& s : segments_) {
    if (!s.sequence_id.empty()) ids.push_back(s.sequence_id);
  }
  return ids;
}

v1::Trajectory Session::ToTrajectory(const v1::Trajectory& header) const {
  v1::Trajectory t = header;
  t.clear_segments();
  for (const RecordedSegment& seg : segments_) {
    v1::Segment* s = t.add_segments();
    s->set_reason(seg.reason);
    for (const RecordedTurn& rt : seg.turns) {
      v1::Turn* turn = s->add_turns();
      turn->set_role(ProtoRole(rt.message.role));
      turn->set_text(rt.message.content);
      for (const ToolCall& c : rt.message.tool_calls) {
        v1::ToolCall* pc = turn->add_tool_calls();
        pc->set_id(c.id);
        pc->set_name(c.name);
        pc->set_arguments_json(c.arguments_json);
      }
      turn->set_tool_call_id(rt.message.tool_call_id);
      *turn->mutable_tokens() = rt.tokens;
      turn->set_start_unix_ms(rt.start_unix_ms);
      turn->set_end_unix_ms(rt.end_unix_ms);
    }
  }
  return t;
}

}  // namespace flotilla::worker
