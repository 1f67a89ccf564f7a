// `flotilla model <verb> --model DIR`: tools over a Hugging Face model folder. Each verb is one
// Add*Verb function below registering itself on the `model` group; a new verb adds its own
// function and one line in AddModelCommand.
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "commands.h"
#include "flotilla/inference/hf_tokenizer.h"

namespace flotilla::cli {
namespace {

// `flotilla model tokenize --model DIR`: stdin as text, the ids comma-separated on one line.
void AddTokenizeVerb(CLI::App& model, int* exit_code) {
  CLI::App* cmd = model.add_subcommand("tokenize", "Print the token ids of stdin's text, comma-separated");
  struct Args {
    std::string dir;
    bool no_special = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->dir, "model folder with tokenizer.json (and tokenizer_config.json)")->required();
  cmd->add_flag("--no-special", a->no_special, "read special tokens in the text as plain text");
  cmd->callback([a, exit_code] {
    auto tok = inference::HfTokenizer::LoadDir(a->dir);
    if (!tok.ok()) {
      std::cerr << "flotilla model tokenize: " << tok.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    auto ids = (*tok)->Encode(text, /*parse_special=*/!a->no_special);
    if (!ids.ok()) {
      std::cerr << "flotilla model tokenize: stdin: " << ids.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) line += ',';
      line += std::to_string((*ids)[i]);
    }
    std::cout << line << "\n";
  });
}

}  // namespace

void AddModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model = app.add_subcommand("model", "Tools over a Hugging Face model folder");
  model->require_subcommand(1);
  AddTokenizeVerb(*model, exit_code);
  AddModelChatTemplateCommand(*model, exit_code);
  AddModelLogprobsVerb(*model, exit_code);
  AddModelInitVerb(*model, exit_code);
}

}  // namespace flotilla::cli
