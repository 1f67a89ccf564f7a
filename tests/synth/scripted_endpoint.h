// A scripted OpenAI-compatible endpoint for the synthesizer's model tests: a real HTTP server
// (common/http_server.h) on a loopback port answering GET /v1/models and POST
// /v1/chat/completions with the text a test's script returns for the request's system and user
// turns, and keeping every request it answered.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/common/http_server.h"
#include "nlohmann/json.hpp"

namespace flotilla::synth {

struct ScriptedTurn {
  std::string system;
  std::string user;
};

class ScriptedEndpoint {
 public:
  // The script returns the reply's text for a request.
  using Script = std::function<std::string(const ScriptedTurn&)>;

  explicit ScriptedEndpoint(Script script) : script_(std::move(script)) {
    auto s = HttpServer::Start("127.0.0.1:0", [this](const HttpRequest& r, HttpResponder& w) { Handle(r, w); });
    if (s.ok()) server_ = std::move(*s);
  }
  bool ok() const { return server_ != nullptr; }
  std::string base_url() const { return "http://" + server_->address() + "/v1"; }
  std::vector<ScriptedTurn> turns() const {
    std::lock_guard<std::mutex> l(mu_);
    return turns_;
  }

 private:
  void Handle(const HttpRequest& r, HttpResponder& w) {
    if (r.method == "GET" && r.path == "/v1/models") {
      w.Send(200, "application/json", R"({"object":"list","data":[{"id":"scripted","object":"model"}]})");
      return;
    }
    if (r.method != "POST" || r.path != "/v1/chat/completions") {
      w.Send(404, "application/json", R"({"error":{"message":"not found"}})");
      return;
    }
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("messages")) {
      w.Send(400, "application/json", R"({"error":{"message":"no messages"}})");
      return;
    }
    ScriptedTurn t;
    for (const auto& m : j["messages"]) {
      if (m.value("role", "") == "system") t.system += m.value("content", "");
      if (m.value("role", "") == "user") t.user += m.value("content", "");
    }
    std::string text = script_(t);
    {
      std::lock_guard<std::mutex> l(mu_);
      turns_.push_back(t);
    }
    nlohmann::json reply = {{"id", "chatcmpl-scripted"},
                            {"object", "chat.completion"},
                            {"model", "scripted"},
                            {"choices", {{{"index", 0},
                                          {"message", {{"role", "assistant"}, {"content", text}}},
                                          {"finish_reason", "stop"}}}},
                            {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 10}}}};
    w.Send(200, "application/json", reply.dump());
  }

  Script script_;
  mutable std::mutex mu_;
  std::vector<ScriptedTurn> turns_;
  std::unique_ptr<HttpServer> server_;  // last: stopped first, while the script still lives
};

// Real one-bug rewrites of the functions of tests/synth/testdata/tally/tally/core.py, each
// failing one or two of its ten tests, and for each the line of the original the bug changes.
struct TallyBug {
  std::string name;
  std::string rewrite;
  std::string fixed_line;
};

inline const std::vector<TallyBug>& TallyBugs() {
  static const std::vector<TallyBug> bugs = {
      {"clamp",
       "def clamp(x, low, high):\n    \"\"\"x limited to the range [low, high].\"\"\"\n    if x < low:\n"
       "        return low\n    if x > high:\n        return x\n    return x\n",
       "return high"},
      {"mean",
       "def mean(values):\n    \"\"\"The arithmetic mean of a non-empty sequence.\"\"\"\n    if not values:\n"
       "        raise ValueError(\"mean of no values\")\n    return sum(values[1:]) / len(values)\n",
       "return sum(values) / len(values)"},
      {"count_if",
       "def count_if(pred, values):\n    \"\"\"How many of values satisfy pred.\"\"\"\n    n = 0\n"
       "    for v in values[:-1]:\n        if pred(v):\n            n += 1\n    return n\n",
       "for v in values:"},
      {"chunks",
       "def chunks(values, size):\n    \"\"\"values cut into lists of size items (the last may be shorter).\"\"\"\n"
       "    if size <= 0:\n        raise ValueError(\"size must be positive\")\n"
       "    return [values[i:i + size] for i in range(0, len(values) - 1, size)]\n",
       "return [values[i:i + size] for i in range(0, len(values), size)]"},
      {"is_sorted",
       "def is_sorted(values):\n    \"\"\"Whether values never decrease.\"\"\"\n"
       "    return all(a < b for a, b in zip(values, values[1:]))\n",
       "return all(a <= b for a, b in zip(values, values[1:]))"},
  };
  return bugs;
}

// The bug of the function the user turn names ("Function: NAME"), or null.
inline const TallyBug* BugFor(const std::string& user) {
  for (const TallyBug& b : TallyBugs()) {
    if (user.find("Function: " + b.name + "\n") != std::string::npos) return &b;
  }
  return nullptr;
}

}  // namespace flotilla::synth
