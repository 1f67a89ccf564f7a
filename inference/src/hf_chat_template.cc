#include "flotilla/inference/hf_chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::inference {
namespace {

constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token as tokenizer_config.json stores it: a string, or an AddedToken object whose
// "content" is the text; null when absent.
absl::StatusOr<std::optional<std::string>> TokenText(const nlohmann::ordered_json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return absl::InvalidArgumentError(absl::StrCat(where, ": expected a string or an object with \"content\""));
}

}  // namespace

absl::StatusOr<HfChatTemplate> HfChatTemplate::FromTokenizerConfig(const nlohmann::ordered_json& config,
                                                                    const std::string& source) {
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  HfChatTemplate t;
  for (const char* name : kSpecialTokens) {
    if (!config.contains(name)) continue;
    ASSIGN_OR_RETURN(std::optional<std::string> text, TokenText(config[name], absl::StrCat(source, ": ", name)));
    if (text) t.special_tokens_[name] = *text;
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json extra = nlohmann::ordered_json::array();
    const auto& list = config["additional_special_tokens"];
    for (size_t i = 0; i < list.size(); ++i) {
      ASSIGN_OR_RETURN(std::optional<std::string> text,
                       TokenText(list[i], absl::StrCat(source, ": additional_special_tokens[", i, "]")));
      if (text) extra.push_back(*text);
    }
    if (!extra.empty()) t.special_tokens_["additional_special_tokens"] = extra;
  }
  if (!config.contains("chat_template")) return absl::NotFoundError(absl::StrCat(source, ": chat_template: missing"));
  const auto& ct = config["chat_template"];
  std::string field = absl::StrCat(source, ": chat_template");
  if (ct.is_string()) {
    t.default_source_ = ct.get<std::string>();
    ASSIGN_OR_RETURN(jinja::Template parsed, jinja::Template::Parse(t.default_source_, field));
    t.default_ = std::move(parsed);
    return t;
  }
  if (!ct.is_array()) return absl::InvalidArgumentError(absl::StrCat(field, ": expected a string or a list"));
  for (size_t i = 0; i < ct.size(); ++i) {
    const auto& entry = ct[i];
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "]: expected {\"name\": string, \"template\": string}"));
    }
    std::string name = entry["name"].get<std::string>();
    if (name != "default" && name != "tool_use") continue;
    std::string text = entry["template"].get<std::string>();
    ASSIGN_OR_RETURN(jinja::Template parsed, jinja::Template::Parse(text, absl::StrCat(field, "[", name, "]")));
    if (name == "default") {
      t.default_source_ = text;
      t.default_ = std::move(parsed);
    } else {
      t.tool_use_ = std::move(parsed);
    }
  }
  if (!t.default_) return absl::InvalidArgumentError(absl::StrCat(field, ": no template named \"default\""));
  return t;
}

absl::StatusOr<HfChatTemplate> HfChatTemplate::Load(const std::string& model_dir) {
  std::filesystem::path dir(model_dir);
  std::string config_path = (dir / "tokenizer_config.json").string();
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  bool have_config = std::filesystem::exists(config_path);
  if (have_config) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
    config = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": not valid JSON"));
  }
  // transformers prefers a separate chat_template.jinja over the config's field.
  std::string jinja_path = (dir / "chat_template.jinja").string();
  if (std::filesystem::exists(jinja_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(jinja_path));
    config["chat_template"] = text;
    return FromTokenizerConfig(config, jinja_path);
  }
  if (!have_config) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": neither chat_template.jinja nor tokenizer_config.json"));
  }
  return FromTokenizerConfig(config, config_path);
}

absl::StatusOr<std::string> HfChatTemplate::Render(const ChatTemplateRequest& request,
                                                   const jinja::RenderOptions& options) const {
  if (!request.messages.is_array()) return absl::InvalidArgumentError("messages: expected a list");
  if (!request.tools.is_null() && !request.tools.is_array()) return absl::InvalidArgumentError("tools: expected a list");
  if (!request.variables.is_object()) return absl::InvalidArgumentError("variables: expected an object");
  nlohmann::ordered_json context = special_tokens_;
  context["messages"] = request.messages;
  context["tools"] = request.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = request.add_generation_prompt;
  for (const auto& [k, v] : request.variables.items()) context[k] = v;
  bool with_tools = request.tools.is_array() && !request.tools.empty();
  const jinja::Template& t = with_tools && tool_use_ ? *tool_use_ : *default_;
  return t.Render(context, options);
}

nlohmann::ordered_json ToHfMessages(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json j;
    switch (m.role) {
      case ChatMessage::Role::kSystem: j["role"] = "system"; break;
      case ChatMessage::Role::kUser: j["role"] = "user"; break;
      case ChatMessage::Role::kAssistant: j["role"] = "assistant"; break;
      case ChatMessage::Role::kTool: j["role"] = "tool"; break;
    }
    j["content"] = m.content;
    if (!m.tool_calls.empty()) {
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (const ToolCall& c : m.tool_calls) {
        nlohmann::ordered_json args = nlohmann::ordered_json::parse(c.arguments_json.empty() ? "{}" : c.arguments_json,
                                                                    nullptr, /*allow_exceptions=*/false);
        if (args.is_discarded()) args = c.arguments_json;
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      j["tool_calls"] = calls;
    }
    if (m.role == ChatMessage::Role::kTool && !m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace flotilla::inference
