// The embedded default in one process: the default model written in C++ and served, the
// scheduler with the in-process node agent registered, a sandbox placed through the
// scheduler's front door and reached through the NodeAgent API, the worker's HTTP endpoint.
#include <unistd.h>

#include <filesystem>

#include "flotilla/app/default_model.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/inference/engine.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::app {
namespace {

TEST(DefaultModelTest, WrittenInCppAndLoadedByTheEngine) {
  flotilla::testing::TempDir dir;
  const std::string prefix = dir.file("models/default-model");
  ASSERT_TRUE(WriteDefaultModel(prefix).ok());
  EXPECT_TRUE(std::filesystem::exists(prefix + ".safetensors"));
  inference::ModelConfig want;
  auto engine = inference::Engine::Create({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE((*engine)->LoadModel("default", want, prefix + ".safetensors", 0).ok());
  // A config the engine would refuse is refused before anything is written.
  inference::ModelConfig bad;
  bad.top_k = bad.n_experts + 1;
  EXPECT_EQ(WriteDefaultModel(dir.file("bad"), bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.safetensors")));
}

TEST(EmbeddedPlatformTest, EveryServiceInOneProcessAndSandboxesFromTheScheduler) {
  flotilla::testing::TempDir dir;
  PlatformOptions o;
  o.worker.state_dir = dir.file("state");
  o.worker.http_address = "127.0.0.1:0";
  o.worker.engine.threads = 1;
  o.engine_listen = "127.0.0.1:0";
  auto p = EmbeddedPlatform::Start(o);
  if (!p.ok() && ::geteuid() != 0) GTEST_SKIP() << "sandboxes need root here: " << p.status();
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> names;
  for (const ServiceEndpoint& s : (*p)->Services()) {
    names.push_back(s.name);
    EXPECT_NE(s.address.find("127.0.0.1:"), std::string::npos) << s.name << " at " << s.address;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"scheduler", "node agent", "engine", "worker HTTP"}));
  EXPECT_EQ((*p)->scheduler()->front().Stats().live_nodes, 1u);

  // A sandbox from the scheduler's front door lands on the embedded node and is reachable
  // through the NodeAgent API.
  v1::CreateSandboxRequest req;
  req.set_tenant("platform-test");
  req.set_policy_name("no-network");
  req.mutable_resources()->set_memory_bytes(256ull << 20);
  auto placed = (*p)->scheduler()->front().CreateSandbox(req);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->node_id(), "embedded");
  v1::ExecRequest ex;
  ex.set_sandbox_id(placed->sandbox_id());
  ex.add_argv("/bin/sh");
  ex.add_argv("-c");
  ex.add_argv("echo placed");
  worker::SandboxClient node_client((*p)->node()->channel());
  auto ran = node_client.Exec(ex);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->exit_code, 0);
  EXPECT_EQ(ran->output, "placed\n");
  EXPECT_TRUE((*p)->scheduler()->front().DeleteSandbox(placed->sandbox_id()).ok());

  // The platform's own sandbox client (eval's scaffolds, the verifier) goes through the same
  // front door: the scheduler knows each sandbox it created, until it is destroyed.
  v1::CreateRequest create;
  create.set_policy_name("no-network");
  auto id = (*p)->sandboxes().Create(create);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ((*p)->sandboxes().NodeOf(*id), "embedded");
  auto known = (*p)->scheduler()->front().GetSandbox(*id);
  ASSERT_TRUE(known.ok()) << known.status();
  EXPECT_EQ(known->node_id(), "embedded");
  ASSERT_TRUE((*p)->sandboxes().PutFile(*id, "/tmp/x", "42", 0644).ok());
  EXPECT_EQ(*(*p)->sandboxes().GetFile(*id, "/tmp/x", 16), "42");
  EXPECT_TRUE((*p)->sandboxes().Destroy(*id).ok());
  ex.set_sandbox_id(*id);
  EXPECT_EQ((*p)->sandboxes().Exec(ex).status().code(), absl::StatusCode::kNotFound);
  create.set_sandbox_id("chosen");
  EXPECT_EQ((*p)->sandboxes().Create(create).status().code(), absl::StatusCode::kInvalidArgument);
  (*p)->Stop();
}

// PlatformOptions::metrics off (the baseline of `bench rollout --metrics-overhead`): no service
// records a figure; on (the default) the same sandbox is counted by the node.
TEST(EmbeddedPlatformTest, MetricsOffRecordsNothing) {
  for (bool metrics : {false, true}) {
    SCOPED_TRACE(metrics ? "metrics on" : "metrics off");
    flotilla::testing::TempDir dir;
    PlatformOptions o;
    o.worker.state_dir = dir.file("state");
    o.worker.serve_model = false;
    o.worker.engine.threads = 1;
    o.metrics = metrics;
    auto p = EmbeddedPlatform::Start(o);
    if (!p.ok() && ::geteuid() != 0) GTEST_SKIP() << "sandboxes need root here: " << p.status();
    ASSERT_TRUE(p.ok()) << p.status();
    v1::CreateRequest create;
    create.set_policy_name("no-network");
    auto id = (*p)->sandboxes().Create(create);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE((*p)->sandboxes().Destroy(*id).ok());
    const std::string text = (*p)->metrics().RenderPrometheus();
    if (metrics) {
      EXPECT_NE(text.find("flotilla_node_sandboxes_created_total{class=\"best_effort\"} 1\n"), std::string::npos)
          << text;
      EXPECT_NE(text.find("flotilla_engine_steps_total 0\n"), std::string::npos) << text;
    } else {
      EXPECT_EQ(text, "");
    }
    (*p)->Stop();
  }
}

}  // namespace
}  // namespace flotilla::app
