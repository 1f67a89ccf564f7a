// The shared fixture of the attack suite.
//
// Every attack test derives from AttackTest. Before a test body runs, the fixture has
//   - opened one sandbox Runtime for the test binary (its own state dir and cgroup prefix),
//   - written a host marker file with random content into a host temp dir,
//   - recorded what the host must still look like afterwards (marker, /usr/bin, /etc files),
//   - created a bystander sandbox holding a secret file, which must stay intact.
// After the body, TearDown checks the host and the bystander (ExpectHostIntact) and destroys
// every sandbox the test made.
//
// SAFETY: an attack runs only through Attack(), which first verifies from inside the sandbox
// that it is isolated (VerifyIsolated: own pid, mount, net namespaces, own root, the host
// marker invisible, writes invisible to the host) and then runs the attack under an inline
// shell guard that re-checks the namespaces and exits 97 before the attack when they are the
// host's. A failed check fails the test; the attack command is never run.
//
// Thread-safety: one test thread, except Exec/Attack, which may be called from helper threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <vector>

#include "flotilla/sandbox/runtime.h"
#include "testing/temp_dir.h"

namespace flotilla::attack {

// What one Exec inside a sandbox produced.
struct RunOutput {
  bool exec_ok = false;        // Exec returned OK (the status is in `error` otherwise)
  std::string error;
  sandbox::ExecResult result;
  std::string out;
  std::string err;
  double host_wall_ms = 0;     // measured by the test around the Exec call
};

// How the sandbox looked from inside when VerifyIsolated ran.
struct InsideView {
  std::string pid_ns, mnt_ns, net_ns, user_ns;  // "pid:[N]" as seen inside
  std::string root;                             // "<dev>:<ino>" of "/" inside
  std::string uid_map;                          // first line of /proc/self/uid_map
};

// Collects the events of one sandbox and lets the test wait for one.
class EventLog {
 public:
  void Add(const sandbox::SandboxEvent& e);
  // Waits up to `timeout` for an event of `kind`; returns it, or nullopt-like kind mismatch.
  bool WaitFor(sandbox::SandboxEvent::Kind kind, std::chrono::milliseconds timeout,
               sandbox::SandboxEvent* out);
  std::vector<sandbox::SandboxEvent> Snapshot();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<sandbox::SandboxEvent> events_;
};

class AttackTest : public ::testing::Test {
 public:
  static constexpr uint64_t kMemoryLimit = 64ull << 20;
  static constexpr uint32_t kPidsLimit = 64;
  static constexpr uint64_t kDiskLimit = 32ull << 20;
  static constexpr int kGuardRefusedExit = 97;

 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  // What SetUpTestSuite does, with the runtime's warm pool of that size (0: off, the suite's
  // default); a fixture testing the pool calls it from its own SetUpTestSuite.
  static void OpenSuiteRuntime(uint32_t warm_pool_size);
  void SetUp() override;
  void TearDown() override;

  static sandbox::Runtime& runtime() { return *runtime_; }

  // Small limits every attack sandbox gets unless the test says otherwise.
  static sandbox::SandboxOptions SmallOptions();

  // Creates a sandbox owned by this test (destroyed in TearDown). Fails the test and returns
  // "" when Create fails.
  std::string NewSandbox(sandbox::SandboxOptions options = SmallOptions(),
                         sandbox::CreateResult* created = nullptr);
  // Destroys one of this test's sandboxes now.
  absl::Status DestroySandbox(const std::string& id);

  // A plain Exec with output collected (used for checks, never for attacks).
  RunOutput Exec(const std::string& id, const std::vector<std::string>& argv, uint32_t timeout_ms = 10000,
                 const std::string& stdin_data = "");

  // Verifies from inside `id` that it is isolated from the host; records the failure and
  // returns false otherwise. `view` (optional) receives what was seen inside.
  bool VerifyIsolated(const std::string& id, InsideView* view = nullptr);

  // Runs `script` with /bin/sh inside `id`, only after VerifyIsolated passed and under the
  // inline guard. Returns exec_ok=false with error "refused: ..." when isolation failed.
  RunOutput Attack(const std::string& id, const std::string& script, uint32_t timeout_ms = 10000);

  // Copies the attack helper into `id` as kHelperPath.
  void InstallHelper(const std::string& id);
  static constexpr const char* kHelperPath = "/attack/helper";

  // The shell guard text (exported for the guard's own test).
  std::string GuardScript() const;

  // Checks the host and the bystander against what SetUp recorded.
  void ExpectHostIntact();

  // Subscribes to `id`'s events.
  std::unique_ptr<sandbox::Watch> WatchInto(const std::string& id, EventLog* log);

  const std::string& marker_path() const { return marker_path_; }
  const std::string& bystander() const { return bystander_; }
  const std::string& bystander_secret() const { return bystander_secret_; }
  const std::string& host_dir() const { return host_dir_->path().native(); }
  static const std::string& cgroup_prefix() { return cgroup_prefix_; }
  // The runtime's state directory on the host (layers, images, per-sandbox dirs).
  static std::string state_path() { return (state_dir_->path() / "state").string(); }

 private:
  static std::unique_ptr<sandbox::Runtime> runtime_;
  static std::unique_ptr<testing::TempDir> state_dir_;
  static std::string cgroup_prefix_;

  std::unique_ptr<testing::TempDir> host_dir_;
  std::string marker_path_;
  std::string marker_content_;
  std::string host_pid_ns_, host_mnt_ns_, host_net_ns_, host_root_;
  std::map<std::string, std::string> host_files_;  // path -> content before the test
  size_t host_usr_bin_entries_ = 0;
  std::string bystander_;
  std::string bystander_secret_;
  std::vector<std::string> sandboxes_;
};

// Lines of `text` that start with `prefix` (the attack helper prints one line per attempt).
std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix);

}  // namespace flotilla::attack
