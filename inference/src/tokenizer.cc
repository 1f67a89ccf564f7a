#include "flotilla/inference/tokenizer.h"

namespace flotilla::inference {

std::vector<int32_t> Encode(std::string_view text) {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string_view SpecialName(int32_t id) {
  switch (id) {
    case kBos: return "<|bos|>";
    case kEos: return "<|eos|>";
    case kSystem: return "<|system|>";
    case kUser: return "<|user|>";
    case kAssistant: return "<|assistant|>";
    case kTool: return "<|tool|>";
    case kEndTurn: return "<|end|>";
    case kToolCallBegin: return "<|tool_call|>";
    case kToolCallEnd: return "<|/tool_call|>";
    case kPad: return "<|pad|>";
    default: return "<|unk|>";
  }
}

std::string Decode(const std::vector<int32_t>& ids, bool skip_special) {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) {
      out.push_back(static_cast<char>(id));
    } else if (!skip_special) {
      out += SpecialName(id);
    }
  }
  return out;
}

}  // namespace flotilla::inference
