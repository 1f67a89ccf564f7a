// flotilla-zygote: the process every sandbox init of flotilla-full's runtimes is a copy of
// (RuntimeOptions::zygote_binary). The runtime starts it; it serves nothing else.
//
// Linked fully static from the zygote's and the init's code alone (cli/CMakeLists.txt): a
// clone of it maps a dozen areas, not the thirty of the `flotilla` binary, so each sandbox's
// clone and its init's exit cost the kernel less.
#include <cstdio>

#include "flotilla/sandbox/zygote_main.h"

int main(int argc, char** argv) {
  if (flotilla::sandbox::RunZygoteIfAsked(argc, argv)) return 0;  // never returns when asked
  std::fputs("flotilla-zygote: only the sandbox runtime starts this program (RuntimeOptions::zygote_binary)\n",
             stderr);
  return 2;
}
