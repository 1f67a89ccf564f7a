// Runs a shell command for a test and collects what it writes to stdout (redirect stderr in
// the command to get both).
#pragma once

#include <cstdio>
#include <string>

namespace flotilla::testing {

// The command's stdout; *status is pclose's wait status (-1 when the shell did not start).
inline std::string RunShell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace flotilla::testing
