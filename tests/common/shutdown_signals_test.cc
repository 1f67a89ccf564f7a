// ShutdownSignals: threads started after it inherit the blocked SIGINT/SIGTERM, so a signal sent
// to the process waits for Wait() instead of killing the process in whichever thread it lands.
#include "flotilla/common/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace flotilla {
namespace {

bool Blocked(int sig) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, nullptr, &cur);
  return sigismember(&cur, sig) == 1;
}

TEST(ShutdownSignalsTest, ThreadsStartedAfterItInheritTheBlockedSignals) {
  ShutdownSignals signals;
  bool int_blocked = false, term_blocked = false;
  std::thread t([&] {
    int_blocked = Blocked(SIGINT);
    term_blocked = Blocked(SIGTERM);
  });
  t.join();
  EXPECT_TRUE(int_blocked);
  EXPECT_TRUE(term_blocked);
}

TEST(ShutdownSignalsTest, ASignalToTheProcessIsTakenByWaitWhileOtherThreadsRun) {
  ShutdownSignals signals;
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_EQ(signals.Wait(), SIGTERM);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  EXPECT_EQ(signals.WaitFor(std::chrono::seconds(10)), SIGINT);
  stop = true;
  busy.join();
}

// A thread started before the instance (a library's pool) does not block the signals; the one
// the kernel gives it is sent on to the waiting thread instead of killing the process.
TEST(ShutdownSignalsTest, ASignalTakenByAnOlderThreadReachesWait) {
  std::atomic<bool> ready{false}, stop{false};
  std::thread older([&] {
    ready = true;
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!ready) std::this_thread::yield();
  {
    ShutdownSignals signals;
    // Aimed at the older thread itself, the one place the kernel could deliver it.
    ASSERT_EQ(pthread_kill(older.native_handle(), SIGTERM), 0);
    EXPECT_EQ(signals.WaitFor(std::chrono::seconds(10)), SIGTERM);
  }
  stop = true;
  older.join();
}

TEST(ShutdownSignalsTest, WaitForReturnsZeroWhenNoSignalCame) {
  ShutdownSignals signals;
  EXPECT_EQ(signals.WaitFor(std::chrono::milliseconds(20)), 0);
}

TEST(ShutdownSignalsTest, DestructionRestoresTheThreadsMask) {
  ASSERT_FALSE(Blocked(SIGTERM));
  {
    ShutdownSignals signals;
    EXPECT_TRUE(Blocked(SIGTERM));
  }
  EXPECT_FALSE(Blocked(SIGTERM));
  EXPECT_FALSE(Blocked(SIGINT));
}

}  // namespace
}  // namespace flotilla
