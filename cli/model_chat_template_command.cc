// `flotilla model chat-template --model DIR --messages FILE.json [--tools FILE.json]`: prints
// the prompt the model folder's chat template renders for a conversation, with the generation
// prompt, exactly (nothing appended).
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "flotilla/inference/hf_chat_template.h"

namespace flotilla::cli {
namespace {

struct ChatTemplateFlags {
  std::string model_dir;
  std::string messages_path;
  std::string tools_path;
  std::vector<std::string> variables;  // NAME=JSON
  bool no_generation_prompt = false;
};

// A JSON file; *error names the file on failure.
bool ReadJson(const std::string& path, nlohmann::ordered_json* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  *out = nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *error = path + ": not valid JSON";
    return false;
  }
  return true;
}

int Run(const ChatTemplateFlags& f) {
  const char* me = "flotilla model chat-template";
  inference::ChatTemplateRequest request;
  std::string error;
  nlohmann::ordered_json messages;
  if (!ReadJson(f.messages_path, &messages, &error)) {
    std::cerr << me << ": " << error << "\n";
    return 2;
  }
  // A list of messages, or a request body that holds one (and maybe its tools).
  if (messages.is_object() && messages.contains("messages")) {
    if (messages.contains("tools")) request.tools = messages["tools"];
    messages = nlohmann::ordered_json(messages["messages"]);
  }
  if (!messages.is_array()) {
    std::cerr << me << ": " << f.messages_path << ": messages: expected a list of messages\n";
    return 2;
  }
  request.messages = messages;
  if (!f.tools_path.empty()) {
    if (!ReadJson(f.tools_path, &request.tools, &error)) {
      std::cerr << me << ": " << error << "\n";
      return 2;
    }
    if (!request.tools.is_array()) {
      std::cerr << me << ": " << f.tools_path << ": tools: expected a list of tools\n";
      return 2;
    }
  }
  for (const std::string& v : f.variables) {
    size_t eq = v.find('=');
    nlohmann::ordered_json value = eq == std::string::npos
                                       ? nlohmann::ordered_json()
                                       : nlohmann::ordered_json::parse(v.substr(eq + 1), nullptr, false);
    if (eq == std::string::npos || eq == 0 || value.is_discarded()) {
      std::cerr << me << ": --var '" << v << "': want NAME=JSON (enable_thinking=false)\n";
      return 2;
    }
    request.variables[v.substr(0, eq)] = value;
  }
  request.add_generation_prompt = !f.no_generation_prompt;
  absl::StatusOr<inference::HfChatTemplate> tmpl = inference::HfChatTemplate::Load(f.model_dir);
  if (!tmpl.ok()) {
    std::cerr << me << ": " << tmpl.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> prompt = tmpl->Render(request);
  if (!prompt.ok()) {
    std::cerr << me << ": " << prompt.status().message() << "\n";
    return 1;
  }
  std::cout << *prompt << std::flush;
  return 0;
}

}  // namespace

void AddModelChatTemplateCommand(CLI::App& model, int* exit_code) {
  auto f = std::make_shared<ChatTemplateFlags>();
  CLI::App* cmd = model.add_subcommand("chat-template", "Print the prompt a model folder's chat template renders");
  cmd->add_option("--model", f->model_dir, "Model folder (chat_template.jinja or tokenizer_config.json)")->required();
  cmd->add_option("--messages", f->messages_path, "JSON file: a list of messages, or a request with \"messages\"")
      ->required();
  cmd->add_option("--tools", f->tools_path, "JSON file: a list of {\"type\": \"function\", \"function\": {...}}");
  cmd->add_option("--var", f->variables, "Extra template variable NAME=JSON, e.g. enable_thinking=false");
  cmd->add_flag("--no-generation-prompt", f->no_generation_prompt, "Leave out the assistant turn's opening");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace flotilla::cli
