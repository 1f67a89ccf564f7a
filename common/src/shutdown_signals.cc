#include "flotilla/common/shutdown_signals.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace flotilla {
namespace {

// The thread that waits (0: no instance).
std::atomic<pid_t> g_waiter{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "signal handlers need lock-free atomics");

// Runs only in a thread that did not block the signals (one started before the instance):
// the signal is sent on to the waiting thread, which has it blocked, so it stays pending there.
extern "C" void ForwardToWaiter(int sig) {
  const int saved = errno;
  const pid_t waiter = g_waiter.load();
  if (waiter > 0) ::syscall(SYS_tgkill, ::getpid(), waiter, sig);
  errno = saved;
}

}  // namespace

ShutdownSignals::ShutdownSignals() {
  pid_t none = 0;
  if (!g_waiter.compare_exchange_strong(none, static_cast<pid_t>(::syscall(SYS_gettid)))) {
    std::fputs("ShutdownSignals: a second instance in one process\n", stderr);
    std::abort();
  }
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &previous_mask_);
  struct sigaction sa {};
  sa.sa_handler = ForwardToWaiter;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &previous_int_);
  sigaction(SIGTERM, &sa, &previous_term_);
}

ShutdownSignals::~ShutdownSignals() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  g_waiter = 0;
}

int ShutdownSignals::Wait() {
  int sig = 0;
  while (sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

int ShutdownSignals::WaitFor(std::chrono::milliseconds timeout) {
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(secs.count());
  ts.tv_nsec = static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout - secs).count());
  for (;;) {
    const int sig = sigtimedwait(&set_, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;
    // EINTR: another signal's handler ran; wait again (the timeout restarts, which is harmless
    // for callers that only poll a stop condition).
  }
}

}  // namespace flotilla
