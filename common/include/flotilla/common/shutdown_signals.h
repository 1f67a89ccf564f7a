// ShutdownSignals: the one way every daemon (`flotilla up`, `worker`, `node`, `scheduler`,
// `engine`, `bridge`) learns that it should stop in order.
//
// Construct it first in the daemon's command, before anything that can start a thread (gRPC
// servers, the engine, the HTTP server): it blocks SIGINT and SIGTERM in the calling thread, and
// threads created afterwards inherit that mask, so the signals stay pending until Wait or
// WaitFor takes them. Threads that already existed (a library's pool started before main, such
// as OpenBLAS's) may still be picked by the kernel: for them it installs a handler that sends
// the signal on to the waiting thread. Blocked only after the threads existed, a signal during
// start-up was delivered to some other thread and its default action killed the process
// without the orderly stop.
//
// One instance per process at a time (a second one aborts); the destructor restores the
// thread's mask and the previous handlers. Wait and WaitFor belong to the constructing thread.
#pragma once

#include <signal.h>

#include <chrono>

namespace flotilla {

class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Blocks until SIGINT or SIGTERM arrives; returns its number.
  int Wait();
  // Waits at most `timeout`; returns SIGINT or SIGTERM, or 0 when neither arrived.
  int WaitFor(std::chrono::milliseconds timeout);

 private:
  sigset_t set_;
  sigset_t previous_mask_;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace flotilla
