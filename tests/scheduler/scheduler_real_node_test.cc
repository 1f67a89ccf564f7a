// `flotilla scheduler` placing real sandboxes on a real `flotilla node` (the sandbox runtime's
// node agent) over loopback gRPC, then running a command in each through the node's Exec and
// deleting them through the scheduler. The node's registration and heartbeats go through
// NodeReporter, the agent side of the Scheduler protocol.
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "child_process.h"
#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/proto/scheduler.grpc.pb.h"
#include "flotilla/scheduler_sim/node_reporter.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "testing/daemon_process.h"

namespace flotilla::scheduler {
namespace {

using testing::ChildProcess;

using flotilla::testing::WaitFor;

// A loopback port that was free a moment ago (the node agent advertises its --listen address,
// so it needs a concrete port).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(SchedulerRealNodeTest, PlacesAndRunsRealSandboxesOnFlotillaNode) {
  flotilla::testing::TempDir dir;
  const std::string bin = absl::StrCat(std::getenv("FLOTILLA_BINARY_DIR") ? std::getenv("FLOTILLA_BINARY_DIR") : ".",
                                       "/cli/flotilla");
  const std::string node_addr = absl::StrCat("127.0.0.1:", FreePort());
  ChildProcess node({bin, "node", "--listen", node_addr, "--state-dir", dir.file("node"), "--slots", "20"},
                    dir.file("node.log"));
  auto agent = v1::NodeAgent::NewStub(grpc::CreateChannel(node_addr, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(WaitFor([&] {
    grpc::ClientContext ctx;
    v1::NodeUsage u;
    return agent->Usage(&ctx, v1::Empty(), &u).ok();
  }, 30)) << node.Log();

  ChildProcess sched({bin, "scheduler", "--listen", "127.0.0.1:0", "--state-dir", dir.file("sched"), "--port-file",
                      dir.file("port"), "--heartbeat-interval", "200ms"},
                     dir.file("sched.log"));
  int port = 0;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(dir.file("port"));
    return static_cast<bool>(in >> port) && port > 0;
  }, 30)) << sched.Log();
  const std::string sched_addr = absl::StrCat("127.0.0.1:", port);

  NodeReporterOptions ro;
  ro.scheduler_address = sched_addr;
  ro.node_id = "real-0";
  ro.node_address = node_addr;
  NodeReporter reporter(
      ro,
      [&] {
        grpc::ClientContext uctx, lctx;
        v1::NodeUsage usage;
        v1::ListResponse list;
        (void)agent->Usage(&uctx, v1::Empty(), &usage);
        (void)agent->List(&lctx, v1::ListRequest(), &list);
        std::vector<std::string> ids;
        for (const auto& s : list.sandboxes()) ids.push_back(s.sandbox_id());
        return std::make_pair(FromProto(usage), ids);
      },
      nullptr);

  auto stub = v1::Scheduler::NewStub(grpc::CreateChannel(sched_addr, grpc::InsecureChannelCredentials()));
  std::vector<v1::SandboxPlacement> placed;
  auto create = [&] {
    grpc::ClientContext ctx;
    v1::CreateSandboxRequest req;
    req.set_tenant("exp");
    req.set_policy_name("default");
    req.mutable_resources()->set_memory_bytes(64ull << 20);
    req.mutable_resources()->set_cpu_quota_millicores(100);
    v1::CreateSandboxResponse resp;
    grpc::Status s = stub->CreateSandbox(&ctx, req, &resp);
    if (s.ok()) placed.push_back(resp.placement());
    return s;
  };
  grpc::Status last;
  ASSERT_TRUE(WaitFor([&] { return (last = create()).ok(); }, 60)) << last.error_message() << "\n" << node.Log();
  grpc::Status second = create();
  ASSERT_TRUE(second.ok()) << second.error_message() << "\n" << node.Log();

  for (const auto& p : placed) {
    EXPECT_EQ(p.node_id(), "real-0");
    EXPECT_EQ(p.node_address(), node_addr);
    EXPECT_EQ(p.state(), v1::SandboxPlacement::RUNNING);
    grpc::ClientContext ctx;
    v1::ExecRequest req;
    req.set_sandbox_id(p.sandbox_id());
    req.add_argv("/bin/sh");
    req.add_argv("-c");
    req.add_argv("echo hello-$((40+2))");
    req.set_timeout_ms(20000);
    auto reader = agent->Exec(&ctx, req);
    std::string out;
    int exit_code = -100;
    v1::ExecChunk chunk;
    while (reader->Read(&chunk)) {
      if (chunk.has_exit()) exit_code = chunk.exit().exit_code();
      out += chunk.stdout();
    }
    grpc::Status s = reader->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(out, "hello-42\n");
    EXPECT_EQ(exit_code, 0);
  }
  for (const auto& p : placed) {
    grpc::ClientContext ctx;
    v1::DeleteSandboxRequest req;
    req.set_sandbox_id(p.sandbox_id());
    v1::DeleteSandboxResponse resp;
    grpc::Status s = stub->DeleteSandbox(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  grpc::ClientContext lctx;
  v1::ListResponse list;
  ASSERT_TRUE(agent->List(&lctx, v1::ListRequest(), &list).ok());
  EXPECT_EQ(list.sandboxes_size(), 0);
  reporter.Stop();
}

}  // namespace
}  // namespace flotilla::scheduler
