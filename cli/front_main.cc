// flotilla: the command-line entry point.
//
// `flotilla sandbox ...` runs here, in a binary that loads only the sandbox runtime's
// libraries: `flotilla sandbox run` is one whole process per sandbox, so its start-up is part
// of every sandbox it runs, and the binary with every component (the inference engine's CUDA
// and BLAS libraries among them) spends over 100 ms of CPU in the dynamic loader alone. Every
// other command is handed, with the same arguments, to flotilla-full, the binary with every
// component, installed next to this one.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "flotilla/common/logging.h"

namespace {

// The path of `name` in this executable's directory.
std::string Sibling(const char* name) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  std::string path(self, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/" + name;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sandbox") == 0) {
    flotilla::InitLogging();
    CLI::App app{"Flotilla: agentic RL at scale: sandboxes, scheduler, MoE engine, worker, trainer bridge"};
    app.require_subcommand(1);
    int exit_code = 0;
    flotilla::cli::AddSandboxCommand(app, &exit_code);
    CLI11_PARSE(app, argc, argv);
    return exit_code;
  }
  const std::string full = Sibling("flotilla-full");
  ::execv(full.c_str(), argv);
  std::fprintf(stderr, "flotilla: cannot run %s: %s\n", full.c_str(), std::strerror(errno));
  return 127;
}
