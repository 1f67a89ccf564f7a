#include "fuzz_target.h"

namespace flotilla::fuzz {

std::map<std::string, FuzzFunction>& FuzzTargets() {
  static auto* targets = new std::map<std::string, FuzzFunction>();
  return *targets;
}

}  // namespace flotilla::fuzz
