// `flotilla model <verb> --model DIR`: tools over a Hugging Face model folder. Each verb is one
// Add*Verb function registering itself on the `model` group.
#include "commands.h"

namespace flotilla::cli {

void AddModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model = app.add_subcommand("model", "Tools over a Hugging Face model folder");
  model->require_subcommand(1);
  AddModelLogprobsVerb(*model, exit_code);
}

}  // namespace flotilla::cli
