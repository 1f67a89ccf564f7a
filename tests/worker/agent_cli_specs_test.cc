// The agent CLIs `flotilla eval -a` knows (worker/external_agent.h): each spec starts the file
// its locked npm set installs (checked against var/agents/<name> where
// scripts/test-deps.d/agent-clis.sh installed it), and its configuration is valid JSON once the
// placeholders are filled in.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "flotilla/worker/external_agent.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker {
namespace {

using nlohmann::json;

std::string Filled(const std::string& text) {
  return absl::StrReplaceAll(text, {{"{BASE_URL}", "http://127.0.0.1:8000"}, {"{API_KEY}", "session-s"}});
}

TEST(AgentCliSpecsTest, EachStartsItsInstalledEntryFile) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string agents = std::string(src == nullptr ? "." : src) + "/var/agents";
  EXPECT_EQ(AgentCliNames(), (std::vector<std::string>{"pi", "codex", "opencode", "claude-code", "qwen-code"}));
  std::vector<std::string> missing;
  for (const std::string& name : AgentCliNames()) {
    SCOPED_TRACE(name);
    auto spec = AgentCliSpec(name, agents + "/" + name, 4096, 64);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->name, name);
    EXPECT_EQ(spec->host_install_dir, agents + "/" + name);
    const std::string entry = "/opt/agent/" + spec->entry;
    // The binary itself, or the script Node.js runs.
    const bool started = spec->argv[0] == entry || (spec->argv[0] == "{NODE}" && spec->argv[1] == entry);
    EXPECT_TRUE(started) << spec->argv[0];
    if (std::filesystem::exists(agents + "/" + name)) {
      EXPECT_TRUE(std::filesystem::exists(agents + "/" + name + "/" + spec->entry)) << spec->entry;
    } else {
      missing.push_back(name);
    }
  }
  auto opencode = OpenCodeAgentSpec("d", 4096, 64);
  json config = json::parse(Filled(opencode.env.at("OPENCODE_CONFIG_CONTENT")));
  EXPECT_EQ(config["provider"]["flotilla"]["options"], (json{{"baseURL", "http://127.0.0.1:8000/v1"},
                                                            {"apiKey", "session-s"}}));
  EXPECT_EQ(config["provider"]["flotilla"]["models"]["flotilla"]["limit"], (json{{"context", 4096}, {"output", 64}}));
  auto claude = ClaudeCodeAgentSpec("d", 64);
  EXPECT_EQ(Filled(claude.env.at("ANTHROPIC_BASE_URL")), "http://127.0.0.1:8000");
  EXPECT_EQ(claude.env.at("CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "64");
  auto qwen = QwenCodeAgentSpec("d", 64);
  EXPECT_EQ(Filled(qwen.env.at("OPENAI_BASE_URL")), "http://127.0.0.1:8000/v1");
  json settings = json::parse(qwen.files.at("/root/.qwen/settings.json"));
  EXPECT_EQ(settings["model"]["generationConfig"]["samplingParams"]["max_tokens"], 64);

  auto unknown = AgentCliSpec("aider", "d", 4096, 64);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(), "agent CLI 'aider': unknown (pi, codex, opencode, claude-code, qwen-code)");
  if (!missing.empty()) {
    std::string names;
    for (const std::string& n : missing) names += " " + n;
    GTEST_SKIP() << "not installed in " << agents << " (scripts/test-deps.d/agent-clis.sh), entry files unchecked:"
                 << names;
  }
}

}  // namespace
}  // namespace flotilla::worker
