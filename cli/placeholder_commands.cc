#include <iostream>

#include "commands.h"

namespace flotilla::cli {

void AddPlaceholderCommand(CLI::App& app, const char* name, const char* description, int* exit_code) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  sub->callback([name, exit_code] {
    std::cerr << "flotilla " << name << ": this subcommand is not available in this build yet\n";
    *exit_code = 2;
  });
}

}  // namespace flotilla::cli
