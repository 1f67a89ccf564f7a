// libFuzzer's entry point: runs the target named by FLOTILLA_FUZZ_NAME (a compile definition of
// each fuzz binary) among those linked in.
#include <cstdio>
#include <cstdlib>

#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const flotilla::fuzz::FuzzFunction target = [] {
    auto& targets = flotilla::fuzz::FuzzTargets();
    auto it = targets.find(FLOTILLA_FUZZ_NAME);
    if (it == targets.end()) {
      std::fprintf(stderr, "no fuzz target %s in this binary\n", FLOTILLA_FUZZ_NAME);
      std::abort();
    }
    return it->second;
  }();
  target(data, size);
  return 0;
}
