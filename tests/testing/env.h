// The environment a test process runs in: CTest sets where the build and the sources are.
#pragma once

#include <cstdlib>
#include <string>

namespace flotilla::testing {

// The variable's value, or `fallback` when it is not set.
inline std::string Env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : value;
}

}  // namespace flotilla::testing
