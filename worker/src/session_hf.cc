// Session's record kept against a Hugging Face chat template (see session.h).
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/hf_chat.h"
#include "flotilla/worker/session.h"
#include "flotilla/worker/token_span.h"
#include "session_internal.h"

namespace flotilla::worker {

absl::StatusOr<TurnPlan> Session::PlanHf(const std::vector<ChatMessage>& messages,
                                         const nlohmann::ordered_json& tools, int64_t now_unix_ms) const {
  // The segment to extend (all its turns repeated) or, failing that, the one sharing most.
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
  const int source = best >= 0 ? best : (partial_k > 0 ? partial : -1);
  size_t kept = best >= 0 ? best_k : partial_k;

  TurnPlan plan;
  plan.tools = tools;
  std::string prefix_text;
  std::vector<std::string> texts;  // the template's text through each new message
  std::string prompt;              // the whole prompt, with the generation prompt
  bool chain = true;               // each of `texts` extends the one before
  // Renders the conversation's new messages after `keep` recorded turns of `source`; false
  // when the template's text of the record is not a prefix of the new prompt.
  auto render = [&](size_t keep) -> absl::StatusOr<bool> {
    plan.conversation.clear();
    texts.clear();
    prefix_text.clear();
    chain = true;
    if (keep > 0) {
      const RecordedSegment& seg = segments_[source];
      for (size_t i = 0; i < keep; ++i) plan.conversation.push_back(seg.turns[i].message);
      const size_t end = seg.turns[keep - 1].rendered_end;
      if (end == 0 || end > seg.rendered.size()) return false;  // the record has no template text
      prefix_text = seg.rendered.substr(0, end);
    }
    plan.conversation.insert(plan.conversation.end(), messages.begin() + keep, messages.end());
    ASSIGN_OR_RETURN(prompt, hf_->Render(plan.conversation, tools, /*add_generation_prompt=*/true));
    if (!absl::StartsWith(prompt, prefix_text)) return false;
    std::string before = prefix_text;
    for (size_t i = keep; i < messages.size(); ++i) {
      std::vector<ChatMessage> upto(plan.conversation.begin(), plan.conversation.begin() + i + 1);
      ASSIGN_OR_RETURN(std::string t, hf_->Render(upto, tools, /*add_generation_prompt=*/false));
      if (!absl::StartsWith(t, before) || !absl::StartsWith(prompt, t)) chain = false;
      before = t;
      texts.push_back(std::move(t));
    }
    return true;
  };
  ASSIGN_OR_RETURN(bool consistent, render(kept));
  bool rerendered = false;
  if (!consistent) {
    // The template renders the recorded turns differently now: prefill its text anew.
    kept = 0;
    rerendered = best >= 0 || partial_k > 0;
    ASSIGN_OR_RETURN(consistent, render(0));
  }
  if (!chain) {
    // A template that renders a conversation's last message its own way (Qwen3: an assistant
    // turn at the end gets an empty <think> block): each message's text runs through the
    // next end token (and the whitespace after it) in the prompt; what cannot be split so
    // goes with the generation prompt (in the reply turn, loss mask 0 like every prompt id).
    size_t pos = prefix_text.size();
    for (size_t i = kept; i < messages.size(); ++i) {
      size_t end = hf_->end_text().empty() ? std::string::npos : prompt.find(hf_->end_text(), pos);
      if (end == std::string::npos) {
        for (size_t j = i; j < messages.size(); ++j) texts[j - kept] = prompt.substr(0, pos);
        break;
      }
      end += hf_->end_text().size();
      while (end < prompt.size() && (prompt[end] == '\n' || prompt[end] == ' ')) ++end;
      pos = end;
      texts[i - kept] = prompt.substr(0, pos);
    }
  }

  std::vector<int32_t> context;
  if (best >= 0 && !rerendered) {
    plan.segment = best;
    context = segments_[best].TokenIds();
  } else {
    plan.new_segment_reason =
        rerendered ? "history-rerendered" : NewSegmentReason(segments_.empty(), partial_k, messages.size());
    if (kept > 0) StartFromTurns(segments_[source], source, kept, &plan, &context);
  }
  plan.reused_tokens = static_cast<uint32_t>(context.size());

  // Each new message's text, tokenized.
  std::string last = prefix_text;
  for (size_t i = kept; i < messages.size(); ++i) {
    const std::string& t = texts[i - kept];
    std::string piece = t.size() > last.size() ? t.substr(last.size()) : std::string();
    RecordedTurn turn;
    turn.message = messages[i];
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, hf_->Encode(piece));
    AppendContextTokens(&turn.tokens, ids);
    turn.tokens.set_experts_per_token(experts_per_token_);
    turn.start_unix_ms = turn.end_unix_ms = now_unix_ms;
    turn.rendered_end = std::max(t.size(), last.size());
    context.insert(context.end(), ids.begin(), ids.end());
    plan.new_turns.push_back(std::move(turn));
    if (t.size() > last.size()) last = t;
  }
  plan.prompt_text = prompt;
  plan.generation_prompt = prompt.substr(last.size());
  ASSIGN_OR_RETURN(plan.reply_head, hf_->Encode(plan.generation_prompt));
  context.insert(context.end(), plan.reply_head.begin(), plan.reply_head.end());
  if (context.empty()) {
    return absl::InvalidArgumentError("messages: the chat template renders nothing to generate after");
  }
  plan.context_tokens = static_cast<uint32_t>(context.size());
  const RecordedSegment* seg = plan.segment >= 0 ? &segments_[plan.segment] : nullptr;
  if (seg != nullptr && !seg->sequence_id.empty() && seg->engine_tokens <= context.size()) {
    plan.call.sequence_id = seg->sequence_id;
    plan.call.new_tokens.assign(context.begin() + seg->engine_tokens, context.end());
  } else {
    plan.call.new_tokens = std::move(context);
  }
  return plan;
}

// The segment's template text from now on: the prompt, then the template's rendering of the
// reply through its end token and the whitespace after it, taken from the conversation with
// one more message after the reply (a template may render a final assistant turn its own
// way). After the generated ids come the ids of that end (the end token itself only when
// generation stopped without it).
void Session::CloseHfReply(const TurnPlan& plan, const GenerationOutcome& outcome, RecordedSegment* seg,
                           RecordedTurn* reply) const {
  std::vector<ChatMessage> conversation = plan.conversation;
  conversation.push_back(reply->message);
  ChatMessage probe;
  probe.role = ChatMessage::Role::kUser;
  probe.content = "?";
  conversation.push_back(probe);
  absl::StatusOr<std::string> after = hf_->Render(conversation, plan.tools, /*add_generation_prompt=*/false);
  const std::string& end = hf_->end_text();
  seg->rendered.clear();
  reply->rendered_end = 0;
  std::string tail;
  if (after.ok() && !end.empty() && absl::StartsWith(*after, plan.prompt_text)) {
    size_t pos = after->find(end, plan.prompt_text.size());
    if (pos != std::string::npos) {
      size_t stop = pos + end.size();
      while (stop < after->size() && ((*after)[stop] == '\n' || (*after)[stop] == ' ')) ++stop;
      const bool ended = !outcome.tokens.empty() && hf_->end_id().has_value() &&
                         outcome.tokens.back().token == *hf_->end_id();
      tail = after->substr(ended ? pos + end.size() : pos, stop - (ended ? pos + end.size() : pos));
      seg->rendered = after->substr(0, stop);
      reply->rendered_end = stop;
    }
  }
  // Without that text the next request opens a new segment (history-rerendered).
  absl::StatusOr<std::vector<int32_t>> ids = hf_->Encode(tail);
  if (ids.ok()) AppendContextTokens(&reply->tokens, *ids);
}

}  // namespace flotilla::worker
