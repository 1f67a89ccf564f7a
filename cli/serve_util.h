// Blocks the calling thread until SIGINT or SIGTERM (for the serving subcommands).
#pragma once

#include <csignal>

namespace flotilla::cli {

inline void WaitForShutdownSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
}

}  // namespace flotilla::cli
