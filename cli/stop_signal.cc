#include "stop_signal.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace flotilla::cli {
namespace {

std::atomic<int> g_first{0};
std::atomic<int> g_count{0};
std::atomic<bool> g_installed{false};

static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");

extern "C" void RecordStopSignal(int sig) {
  int expected = 0;
  g_first.compare_exchange_strong(expected, sig);
  g_count.fetch_add(1);
}

}  // namespace

StopSignal::StopSignal() {
  if (g_installed.exchange(true)) {
    std::fputs("StopSignal: a second instance in one process\n", stderr);
    std::abort();
  }
  g_first = 0;
  g_count = 0;
  struct sigaction sa {};
  sa.sa_handler = RecordStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_installed = false;
}

int StopSignal::received() const { return g_first.load(); }
int StopSignal::count() const { return g_count.load(); }

}  // namespace flotilla::cli
