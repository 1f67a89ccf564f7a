// HfChat: the chat side of a Hugging Face model folder as the worker uses it: the folder's
// tokenizer (tokenizer.json), its chat template (tokenizer_config.json / chat_template.jinja),
// the tool-call format that template asks for, and the ids that end a reply (the tokenizer's
// eos token, generation_config.json's and config.json's eos_token_id).
//
// With an HfChat the ChatService renders conversations through the template instead of the
// byte model's fixed format (chat_template.h); see session.h for how the record stays exact.
//
// Immutable after Load; thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/hf_chat_template.h"
#include "flotilla/inference/hf_tokenizer.h"
#include "flotilla/inference/reply_parser.h"
#include "flotilla/worker/chat_types.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker {

class HfChat {
 public:
  // Errors name the folder's file and field.
  static absl::StatusOr<std::unique_ptr<HfChat>> Load(const std::string& dir);

  // The template's text for `messages` with `tools` (null or a list, HfTools' layout).
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt) const;
  // The ids of rendered text (special tokens written by the template become their ids).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;

  const inference::HfTokenizer& tokenizer() const { return *tokenizer_; }
  inference::ToolCallFormat tool_format() const { return tool_format_; }
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }
  bool IsStop(int32_t id) const;
  // The text of the token that closes an assistant turn (the tokenizer's eos); "" if none.
  const std::string& end_text() const { return end_text_; }
  std::optional<int32_t> end_id() const { return tokenizer_->eos_id(); }

 private:
  HfChat() = default;
  std::unique_ptr<inference::HfTokenizer> tokenizer_;
  std::optional<inference::HfChatTemplate> template_;
  inference::ToolCallFormat tool_format_ = inference::ToolCallFormat::kHermes;
  std::vector<int32_t> stop_tokens_;
  std::string end_text_;
};

// Tool definitions in transformers' layout: null without tools, else
// [{"type": "function", "function": {"name", "description", "parameters"}}].
nlohmann::ordered_json HfTools(const std::vector<ToolSpec>& tools);

}  // namespace flotilla::worker
