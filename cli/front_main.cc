// flotilla: the command-line entry point.
//
// `flotilla sandbox ...` runs here, in a binary that loads only the sandbox runtime's
// libraries: `flotilla sandbox run` is one whole process per sandbox, so its start-up is part
// of every sandbox it runs, and the binary with every component (the inference engine's CUDA
// and BLAS libraries among them) spends over 100 ms of CPU in the dynamic loader alone. Every
// other command is handed, with the same arguments, to flotilla-full, the binary with every
// component, installed next to this one. flotilla-full's sandbox runtimes start the static
// flotilla-zygote as their zygote (RuntimeOptions::zygote_binary), so that sandbox inits are
// copies of a small process; this binary serves as one where that could not be built.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "flotilla/common/logging.h"
#include "flotilla/sandbox/zygote_main.h"

int main(int argc, char** argv) {
  // `flotilla sandbox zygote ...`: the runtime of another process asked for its zygote (where
  // no flotilla-zygote was built).
  if (flotilla::sandbox::RunZygoteIfAsked(argc, argv)) return 0;
  if (argc >= 2 && std::strcmp(argv[1], "sandbox") == 0) {
    flotilla::InitLogging();
    CLI::App app{"Flotilla: agentic RL at scale: sandboxes, scheduler, MoE engine, worker, trainer bridge"};
    app.require_subcommand(1);
    int exit_code = 0;
    flotilla::cli::AddSandboxCommand(app, &exit_code);
    CLI11_PARSE(app, argc, argv);
    return exit_code;
  }
  const std::string full = flotilla::sandbox::SiblingExecutable("flotilla-full");
  if (full.empty()) {
    std::fprintf(stderr, "flotilla: flotilla-full is not installed next to this program\n");
    return 127;
  }
  ::execv(full.c_str(), argv);
  std::fprintf(stderr, "flotilla: cannot run %s: %s\n", full.c_str(), std::strerror(errno));
  return 127;
}
