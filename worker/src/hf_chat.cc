#include "flotilla/worker/hf_chat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::worker {
namespace {

// eos_token_id of a JSON file in the folder: an int, a list of ints, or absent.
absl::Status AddEosIds(const std::string& path, std::vector<int32_t>* ids) {
  if (!std::filesystem::exists(path)) return absl::OkStatus();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  auto add = [&](const nlohmann::json& v) -> absl::Status {
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": eos_token_id must be an integer or a list of integers"));
    }
    ids->push_back(v.get<int32_t>());
    return absl::OkStatus();
  };
  if (it->is_array()) {
    for (const auto& v : *it) RETURN_IF_ERROR(add(v));
    return absl::OkStatus();
  }
  return add(*it);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfChat>> HfChat::Load(const std::string& dir) {
  std::unique_ptr<HfChat> c(new HfChat());
  ASSIGN_OR_RETURN(c->tokenizer_, inference::HfTokenizer::LoadDir(dir));
  ASSIGN_OR_RETURN(inference::HfChatTemplate t, inference::HfChatTemplate::Load(dir));
  c->tool_format_ = inference::DetectToolCallFormat(t.source());
  if (c->tool_format_ == inference::ToolCallFormat::kNone) c->tool_format_ = inference::ToolCallFormat::kHermes;
  c->template_.emplace(std::move(t));
  if (auto eos = c->tokenizer_->eos_id(); eos.has_value()) {
    c->stop_tokens_.push_back(*eos);
    c->end_text_ = c->tokenizer_->TokenBytes(*eos);
  }
  const std::filesystem::path d(dir);
  RETURN_IF_ERROR(AddEosIds((d / "generation_config.json").string(), &c->stop_tokens_));
  RETURN_IF_ERROR(AddEosIds((d / "config.json").string(), &c->stop_tokens_));
  std::sort(c->stop_tokens_.begin(), c->stop_tokens_.end());
  c->stop_tokens_.erase(std::unique(c->stop_tokens_.begin(), c->stop_tokens_.end()), c->stop_tokens_.end());
  if (c->stop_tokens_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": no end-of-reply token (tokenizer_config.json eos_token, generation_config.json eos_token_id)"));
  }
  return c;
}

absl::StatusOr<std::string> HfChat::Render(const std::vector<ChatMessage>& messages,
                                           const nlohmann::ordered_json& tools,
                                           bool add_generation_prompt) const {
  inference::ChatTemplateRequest req;
  req.messages = inference::ToHfMessages(messages);
  req.tools = tools;
  req.add_generation_prompt = add_generation_prompt;
  return template_->Render(req);
}

absl::StatusOr<std::vector<int32_t>> HfChat::Encode(std::string_view text) const {
  return tokenizer_->Encode(text, /*parse_special=*/true);
}

bool HfChat::IsStop(int32_t id) const {
  return std::binary_search(stop_tokens_.begin(), stop_tokens_.end(), id);
}

nlohmann::ordered_json HfTools(const std::vector<ToolSpec>& tools) {
  if (tools.empty()) return nullptr;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolSpec& t : tools) {
    nlohmann::ordered_json params = nlohmann::ordered_json::parse(t.parameters_json, nullptr, false);
    if (params.is_discarded()) params = nlohmann::ordered_json::object();
    out.push_back({{"type", "function"},
                   {"function", {{"name", t.name}, {"description", t.description}, {"parameters", params}}}});
  }
  return out;
}

}  // namespace flotilla::worker
