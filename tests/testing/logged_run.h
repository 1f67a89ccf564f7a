// Runs a program for a test, its stdout and stderr into one log file, and returns its exit
// status and that log:
//
//   LoggedRun r = RunLogged({FlotillaBinary(), "synth", "--repo", repo, "--out", out}, dir.file("synth.log"));
//   ASSERT_EQ(r.status, 0) << r.out;
//
// status is the exit code, 128 + the signal for a killed program, 127 when it could not be
// executed, 126 when the log could not be opened.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "flotilla/common/text_files.h"

namespace flotilla::testing {

struct LoggedRun {
  int status = -1;
  std::string out;
};

inline LoggedRun RunLogged(std::vector<std::string> argv, const std::string& log) {
  LoggedRun r;
  pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {
    if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    ::dup2(1, 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = ReadFileOrEmpty(log);
  return r;
}

}  // namespace flotilla::testing
