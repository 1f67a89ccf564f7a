#include "flotilla/inference/reply_parser.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "tool_call_formats.h"

namespace flotilla::inference {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// The longest suffix of `buf` that is a proper prefix of one of `markers`: text that the next
// delta may complete into a marker.
size_t HoldBack(std::string_view buf, std::initializer_list<std::string_view> markers) {
  size_t longest = 0;
  for (std::string_view m : markers) {
    if (m.empty()) continue;
    for (size_t k = std::min(buf.size(), m.size() - 1); k > longest; --k) {
      if (buf.substr(buf.size() - k) == m.substr(0, k)) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

ReplyParser::ReplyParser(ReplyParserOptions options) : options_(std::move(options)) {
  switch (options_.format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
      open_marker_ = kToolCallOpen;
      close_marker_ = kToolCallClose;
      break;
    case ToolCallFormat::kDeepSeekV3:
      open_marker_ = kDeepSeekCallsBegin;
      close_marker_ = kDeepSeekCallsEnd;
      break;
    case ToolCallFormat::kNone: break;
  }
  if (options_.parse_think && options_.starts_in_reasoning) {
    state_ = State::kReasoning;
    strip_leading_newlines_ = true;
  }
}

ReplyDelta ReplyParser::Feed(std::string_view delta) {
  buffer_.append(delta);
  ReplyDelta out;
  Process(false, out);
  return out;
}

ReplyDelta ReplyParser::Finish() {
  ReplyDelta out;
  Process(true, out);
  return out;
}

void ReplyParser::Process(bool final, ReplyDelta& out) {
  while (true) {
    bool again = false;
    switch (state_) {
      case State::kContent: again = ProcessContent(final, out); break;
      case State::kReasoning: again = ProcessReasoning(final, out); break;
      case State::kToolBlock: again = ProcessToolBlock(final, out); break;
    }
    if (!again) return;
  }
}

bool ReplyParser::ProcessContent(bool final, ReplyDelta& out) {
  size_t think = options_.parse_think ? buffer_.find(kThinkOpen) : std::string::npos;
  size_t tool = open_marker_.empty() ? std::string::npos : buffer_.find(open_marker_);
  size_t at = std::min(think, tool);
  if (at != std::string::npos) {
    EmitContent(std::string_view(buffer_).substr(0, at), at == tool ? Tail::kDrop : Tail::kFlush, out);
    if (at == tool) {
      buffer_.erase(0, at + open_marker_.size());
      state_ = State::kToolBlock;
      block_calls_ = 0;
    } else {
      buffer_.erase(0, at + kThinkOpen.size());
      state_ = State::kReasoning;
      strip_leading_newlines_ = true;
    }
    return true;
  }
  size_t hold = final ? 0 : HoldBack(buffer_, {options_.parse_think ? kThinkOpen : std::string_view(), open_marker_});
  EmitContent(std::string_view(buffer_).substr(0, buffer_.size() - hold), final ? Tail::kFlush : Tail::kHold, out);
  buffer_.erase(0, buffer_.size() - hold);
  return false;
}

bool ReplyParser::ProcessReasoning(bool final, ReplyDelta& out) {
  size_t at = buffer_.find(kThinkClose);
  if (at != std::string::npos) {
    EmitReasoning(std::string_view(buffer_).substr(0, at), /*closing=*/true, out);
    buffer_.erase(0, at + kThinkClose.size());
    state_ = State::kContent;
    strip_leading_newlines_ = true;
    return true;
  }
  size_t hold = final ? 0 : HoldBack(buffer_, {kThinkClose});
  EmitReasoning(std::string_view(buffer_).substr(0, buffer_.size() - hold), /*closing=*/final, out);
  buffer_.erase(0, buffer_.size() - hold);
  return false;
}

bool ReplyParser::ProcessToolBlock(bool final, ReplyDelta& out) {
  if (options_.format == ToolCallFormat::kDeepSeekV3) {
    size_t call_end = buffer_.find(kDeepSeekCallEnd);
    size_t block_end = buffer_.find(kDeepSeekCallsEnd);
    if (call_end != std::string::npos && (block_end == std::string::npos || call_end < block_end)) {
      std::string_view segment = std::string_view(buffer_).substr(0, call_end);
      std::string_view body = TrimLeading(segment);
      std::optional<ToolCall> call;
      if (body.substr(0, kDeepSeekCallBegin.size()) == kDeepSeekCallBegin) {
        call = ParseDeepSeekCall(body.substr(kDeepSeekCallBegin.size()));
      }
      if (call) {
        AddCall(std::move(*call), out);
      } else {
        EmitContent(BlockHead() + std::string(segment) + std::string(kDeepSeekCallEnd), Tail::kFlush, out);
        ++block_calls_;  // the block's opening marker has been shown
      }
      buffer_.erase(0, call_end + kDeepSeekCallEnd.size());
      return true;
    }
    if (block_end != std::string::npos) {
      std::string_view rest = std::string_view(buffer_).substr(0, block_end);
      if (!Trim(rest).empty()) EmitContent(std::string(rest) + close_marker_, Tail::kFlush, out);
      buffer_.erase(0, block_end + close_marker_.size());
      state_ = State::kContent;
      strip_leading_whitespace_ = true;
      return true;
    }
  } else {
    size_t at = buffer_.find(close_marker_);
    if (at != std::string::npos) {
      std::string_view body = std::string_view(buffer_).substr(0, at);
      std::optional<ToolCall> call = options_.format == ToolCallFormat::kQwen3Coder
                                         ? ParseQwen3CoderCall(body, options_.tools)
                                         : ParseHermesCall(body);
      if (call) {
        AddCall(std::move(*call), out);
        strip_leading_whitespace_ = true;
      } else {
        EmitContent(BlockHead() + std::string(body) + close_marker_, Tail::kFlush, out);
      }
      buffer_.erase(0, at + close_marker_.size());
      state_ = State::kContent;
      return true;
    }
  }
  if (final) {
    // An unfinished block: what the model wrote, shown as it was.
    EmitContent(BlockHead() + buffer_, Tail::kFlush, out);
    buffer_.clear();
    state_ = State::kContent;
  }
  return false;
}

std::string ReplyParser::BlockHead() {
  if (block_calls_ > 0) return "";
  std::string head = std::move(dropped_newlines_) + open_marker_;
  dropped_newlines_.clear();
  return head;
}

void ReplyParser::EmitContent(std::string_view text, Tail tail, ReplyDelta& out) {
  std::string t = std::move(held_content_newlines_) + std::string(text);
  held_content_newlines_.clear();
  if (strip_leading_newlines_) {
    size_t n = t.find_first_not_of('\n');
    t.erase(0, n == std::string::npos ? t.size() : n);
    if (!t.empty()) strip_leading_newlines_ = false;
  }
  if (strip_leading_whitespace_) {
    t = std::string(TrimLeading(t));
    if (!t.empty()) strip_leading_whitespace_ = false;
  }
  if (tail != Tail::kFlush) {
    size_t keep = t.find_last_not_of('\n');
    keep = keep == std::string::npos ? 0 : keep + 1;
    (tail == Tail::kHold ? held_content_newlines_ : dropped_newlines_) = t.substr(keep);
    t.resize(keep);
  }
  out.content.append(t);
}

void ReplyParser::EmitReasoning(std::string_view text, bool closing, ReplyDelta& out) {
  std::string t = held_newlines_ + std::string(text);
  held_newlines_.clear();
  if (strip_leading_newlines_) {
    size_t n = t.find_first_not_of('\n');
    t.erase(0, n == std::string::npos ? t.size() : n);
    if (!t.empty()) strip_leading_newlines_ = false;
  }
  size_t keep = t.find_last_not_of('\n');
  keep = keep == std::string::npos ? 0 : keep + 1;
  if (!closing) held_newlines_ = t.substr(keep);
  t.resize(keep);
  out.reasoning.append(t);
}

void ReplyParser::AddCall(ToolCall call, ReplyDelta& out) {
  call.id = absl::StrCat("call_", calls_++);
  ++block_calls_;
  out.tool_calls.push_back(std::move(call));
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  if (source.find("tool▁calls▁begin") != std::string_view::npos) return ToolCallFormat::kDeepSeekV3;
  if (source.find("<function=") != std::string_view::npos) return ToolCallFormat::kQwen3Coder;
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  return ToolCallFormat::kNone;
}

}  // namespace flotilla::inference
