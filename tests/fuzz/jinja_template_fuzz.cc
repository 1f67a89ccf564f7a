// Chat templates (inference/include/flotilla/inference/jinja.h): any template source is parsed
// or refused, and a parsed one renders a fixed conversation (with tools) or fails with an
// InvalidArgument naming the template and line, never crashing, recursing without bound or
// running away with memory.
#include <chrono>
#include <string>

#include "flotilla/inference/jinja.h"
#include "fuzz_check.h"
#include "fuzz_target.h"
#include "nlohmann/json.hpp"

namespace {

const nlohmann::ordered_json& Context() {
  static const auto* context = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2+2? <b>ok</b>"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "4"},
      {"role": "assistant", "content": "<think>easy</think>4"}
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "a+b",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })"));
  return *context;
}

}  // namespace

FLOTILLA_FUZZ_TARGET(jinja_template) {
  namespace jinja = flotilla::inference::jinja;
  auto tmpl = jinja::Template::Parse(std::string_view(reinterpret_cast<const char*>(data), size), "chat_template");
  if (!tmpl.ok()) {
    FUZZ_CHECK(tmpl.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(tmpl.status().message().find("chat_template") != std::string::npos);
    return;
  }
  jinja::RenderOptions options;
  options.now = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));
  auto out = tmpl->Render(Context(), options);
  if (!out.ok()) {
    FUZZ_CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(out.status().message().find("chat_template") != std::string::npos);
  }
}
