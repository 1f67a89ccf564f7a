// `flotilla model ...`: commands over a Hugging Face model folder.
#include "commands.h"

namespace flotilla::cli {

void AddModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model = app.add_subcommand("model", "Work with a Hugging Face model folder");
  model->require_subcommand(1);
  AddModelChatTemplateCommand(*model, exit_code);
}

}  // namespace flotilla::cli
