// A Hugging Face chat template, rendered as transformers' apply_chat_template renders it: the
// template from the model folder's chat_template.jinja, else tokenizer_config.json's
// "chat_template" (a string, or a list of named templates: "tool_use" when tools are given and
// it exists, else "default"); the variables messages, tools (null without tools), documents
// (null), add_generation_prompt, the special tokens tokenizer_config.json names (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token as text, and
// additional_special_tokens), then the caller's extra variables (enable_thinking, ...).
//
// The byte model's fixed chat format (chat_template.h) is its sibling: that one renders token
// ids directly; this one renders text for a real tokenizer to encode.
//
// Immutable after loading; safe to render from many threads at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/jinja.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {

struct ChatTemplateRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // null, or a list of {"type": "function", "function": {"name", "description", "parameters"}}.
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = true;
  // Extra template variables (enable_thinking, ...); they override the special tokens.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

class HfChatTemplate {
 public:
  // From a model folder (chat_template.jinja or tokenizer_config.json). Errors name the file
  // and field: NotFound without either, InvalidArgument for a bad file or template.
  static absl::StatusOr<HfChatTemplate> Load(const std::string& model_dir);
  // From tokenizer_config.json's parsed contents; `source` names it in errors.
  static absl::StatusOr<HfChatTemplate> FromTokenizerConfig(const nlohmann::ordered_json& config,
                                                            const std::string& source);

  // The prompt text; a template error or raise_exception is InvalidArgument naming the line.
  absl::StatusOr<std::string> Render(const ChatTemplateRequest& request,
                                     const jinja::RenderOptions& options = {}) const;

  // The template's source text (the default one when there are several).
  const std::string& source() const { return default_source_; }

 private:
  HfChatTemplate() = default;

  std::optional<jinja::Template> default_;
  std::optional<jinja::Template> tool_use_;
  std::string default_source_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
};

// Flotilla's chat messages in transformers' message layout: {"role", "content"}, an assistant's
// "tool_calls" as [{"id", "type": "function", "function": {"name", "arguments": {...}}}]
// (arguments as an object, transformers' convention), a tool message's "tool_call_id".
nlohmann::ordered_json ToHfMessages(const std::vector<ChatMessage>& messages);

}  // namespace flotilla::inference
