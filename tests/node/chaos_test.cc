// Faults from outside while work is in flight, on the real runtime:
//   - the node agent's process is killed (SIGKILL) while a client streams an Exec: the client's
//     call ends with UNAVAILABLE, the sandbox's processes end with the agent, and the next
//     runtime opened on the node's state dir and cgroup prefix removes the cgroups and state
//     they left, leaving nothing behind;
//   - a sandbox's init is killed while a command runs in it: the Exec ends at once, reported as
//     kSandboxDied, the sandbox is destroyed cleanly and none of its processes or cgroups remain.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/node/node_agent.h"
#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/sandbox/runtime.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::node {
namespace {

namespace fs = std::filesystem;
using sandbox::Runtime;
using sandbox::RuntimeOptions;

// Pids of processes whose command line is exactly `argv`.
std::vector<pid_t> ProcessesRunning(const std::vector<std::string>& argv) {
  std::string want;
  for (const std::string& a : argv) want += a + '\0';
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline == want) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// Cgroup directories under "<hierarchy>/<prefix>" in every hierarchy.
int CgroupsUnder(const std::string& prefix) {
  int n = 0;
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    std::error_code walk;
    const fs::path top = h.path() / prefix;
    if (!fs::is_directory(top, walk)) continue;
    for (auto it = fs::recursive_directory_iterator(top, walk); !walk && it != fs::recursive_directory_iterator();
         it.increment(walk)) {
      n += it->is_directory() ? 1 : 0;
    }
  }
  return n;
}

// Paths under `root` whose file name contains `part` (a sandbox's state, mounts, layers).
std::vector<std::string> PathsNamed(const fs::path& root, const std::string& part) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().find(part) != std::string::npos) out.push_back(it->path().string());
  }
  return out;
}

template <class Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds within = std::chrono::milliseconds(10000)) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

RuntimeOptions Options(const flotilla::testing::TempDir& dir, const std::string& prefix) {
  RuntimeOptions o;
  o.state_dir = dir.path().string();
  o.cgroup_prefix = prefix;
  o.start_ahead = false;
  o.prepare_ahead = false;
  return o;
}

TEST(NodeChaosTest, AgentKilledMidExecFailsTheCallAndItsLeftoversAreCleanedUp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces)";
  flotilla::testing::TempDir dir;
  const std::string prefix = "flotilla-chaos-" + std::to_string(::getpid());
  const std::vector<std::string> marker = {"/bin/sleep", "3117"};
  int ports[2];
  ASSERT_EQ(::pipe(ports), 0);
  // The agent runs in a child of its own, as `flotilla node` does, so it can be killed.
  const pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    ::close(ports[0]);
    auto rt = Runtime::Open(Options(dir, prefix));
    if (!rt.ok()) ::_exit(3);
    NodeAgentOptions ao;
    ao.node_id = "node-chaos";
    ao.slots_capacity = 2;
    auto a = NodeAgent::Create(std::move(*rt), ao);
    if (!a.ok()) ::_exit(4);
    auto server = NodeAgentServer::Start(a->get(), "127.0.0.1:0");
    if (!server.ok()) ::_exit(5);
    const int port = (*server)->port();
    if (::write(ports[1], &port, sizeof(port)) != sizeof(port)) ::_exit(6);
    while (true) ::pause();
  }
  ::close(ports[1]);
  int port = 0;
  const ssize_t got = ::read(ports[0], &port, sizeof(port));
  ::close(ports[0]);
  if (got != sizeof(port)) {
    int status = 0;
    ::waitpid(agent, &status, 0);
    GTEST_SKIP() << "the sandbox runtime or agent could not start here (child exit " << WEXITSTATUS(status) << ")";
  }
  auto stub = v1::NodeAgent::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  v1::CreateRequest creq;
  creq.set_sandbox_id("sbx-chaos-1");
  creq.mutable_resources()->set_memory_bytes(256 << 20);
  v1::CreateResponse cresp;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub->Create(&c1, creq, &cresp).ok());

  v1::ExecRequest ereq;
  ereq.set_sandbox_id("sbx-chaos-1");
  for (const std::string& a : marker) ereq.add_argv(a);
  grpc::ClientContext c2;
  auto reader = stub->Exec(&c2, ereq);
  ASSERT_TRUE(WaitFor([&] { return !ProcessesRunning(marker).empty(); })) << "the command never started";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  v1::ExecChunk chunk;
  while (reader->Read(&chunk)) {
    EXPECT_FALSE(chunk.has_exit()) << "an exit was reported for a command nobody waited on";
  }
  const grpc::Status finished = reader->Finish();
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::UNAVAILABLE) << finished.error_message();

  // The agent's sandboxes die with it (their processes end), but their cgroups outlive it; the
  // node's next runtime takes them away.
  EXPECT_TRUE(WaitFor([&] { return ProcessesRunning(marker).empty(); }));
  EXPECT_GT(CgroupsUnder(prefix), 0);
  {
    RuntimeOptions o = Options(dir, prefix);
    o.cleanup_leftovers = false;
    auto rt = Runtime::Open(o);
    ASSERT_TRUE(rt.ok()) << rt.status();
    auto report = (*rt)->CleanupLeftovers();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_GE(report->sandboxes, 1);
    EXPECT_GE(report->cgroups, 1);  // (an init still exiting may be among report->processes)
  }
  EXPECT_TRUE(WaitFor([&] { return ProcessesRunning(marker).empty(); }));
  EXPECT_EQ(CgroupsUnder(prefix), 0);
  EXPECT_EQ(PathsNamed(dir.path(), "sbx-chaos-1"), std::vector<std::string>{});
}

TEST(NodeChaosTest, SandboxInitKilledMidExecEndsTheExecAndDestroyIsClean) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces)";
  flotilla::testing::TempDir dir;
  const std::string prefix = "flotilla-chaos-" + std::to_string(::getpid()) + "-init";
  auto rt = Runtime::Open(Options(dir, prefix));
  if (!rt.ok()) GTEST_SKIP() << "sandbox runtime unavailable: " << rt.status();
  auto created = (*rt)->Create(sandbox::SandboxOptions{});
  ASSERT_TRUE(created.ok()) << created.status();
  const std::vector<std::string> marker = {"/bin/sleep", "3119"};
  absl::StatusOr<sandbox::ExecResult> result;
  std::thread exec([&] {
    sandbox::ExecOptions eo;
    eo.argv = marker;
    result = (*rt)->Exec(created->id, eo, nullptr);
  });
  std::vector<pid_t> sleeping;
  ASSERT_TRUE(WaitFor([&] { return !(sleeping = ProcessesRunning(marker)).empty(); }));
  const pid_t init = ParentOf(sleeping[0]);
  ASSERT_GT(init, 1);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(init, SIGKILL), 0);
  exec.join();
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(5));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reason, sandbox::StopReason::kSandboxDied);
  EXPECT_EQ(result->detail, "the sandbox's init died");
  EXPECT_TRUE(WaitFor([&] { return ProcessesRunning(marker).empty(); }));
  EXPECT_TRUE((*rt)->Destroy(created->id).ok());
  // A fresh sandbox still works after the fault.
  auto next = (*rt)->Create(sandbox::SandboxOptions{});
  ASSERT_TRUE(next.ok()) << next.status();
  sandbox::ExecOptions eo;
  eo.argv = {"/bin/true"};
  auto ran = (*rt)->Exec(next->id, eo, nullptr);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->exit_code, 0);
  EXPECT_TRUE((*rt)->Destroy(next->id).ok());
  rt->reset();
  EXPECT_EQ(CgroupsUnder(prefix), 0);
}

}  // namespace
}  // namespace flotilla::node
