// The NodeAgent over real gRPC on a loopback port, backed by the real runtime.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/node/node_agent.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/metrics.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::node {
namespace {

using sandbox::Runtime;
using sandbox::RuntimeOptions;

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RuntimeOptions o;
    o.state_dir = dir_.path().string();
    o.cgroup_prefix = "flotilla-test-" + std::to_string(::getpid());
    auto rt = Runtime::Open(o);
    if (!rt.ok()) GTEST_SKIP() << "sandbox runtime unavailable: " << rt.status();
    NodeAgentOptions ao;
    ao.node_id = "node-a";
    ao.slots_capacity = 2;
    ao.metrics = &metrics_;
    auto agent = NodeAgent::Create(std::move(*rt), ao);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    auto server = NodeAgentServer::Start(agent_.get(), "127.0.0.1:0");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::NodeAgent::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    server_.reset();
    agent_.reset();
  }

  // One scrape's samples: "name{labels}" -> value text.
  std::map<std::string, std::string> Scrape() {
    std::map<std::string, std::string> out;
    for (absl::string_view line : absl::StrSplit(metrics_.RenderPrometheus(), '\n', absl::SkipEmpty())) {
      if (line.front() == '#') continue;
      size_t sp = line.rfind(' ');
      out[std::string(line.substr(0, sp))] = std::string(line.substr(sp + 1));
    }
    return out;
  }

  flotilla::testing::TempDir dir_;
  MetricsRegistry metrics_;  // outlives the agent
  std::unique_ptr<NodeAgent> agent_;
  std::unique_ptr<NodeAgentServer> server_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(NodeAgentTest, CreateExecFilesWatchDestroyOverGrpc) {
  grpc::ClientContext wctx;
  v1::WatchRequest wreq;
  auto watch = stub_->Watch(&wctx, wreq);

  v1::CreateRequest creq;
  creq.set_sandbox_id("sbx-agent-1");
  creq.mutable_resources()->set_memory_bytes(256 << 20);
  creq.set_execution_class(v1::LATENCY_SENSITIVE);
  (*creq.mutable_labels())["task"] = "t1";
  v1::CreateResponse cresp;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->Create(&c1, creq, &cresp).ok());
  EXPECT_EQ(cresp.sandbox_id(), "sbx-agent-1");
  EXPECT_GT(cresp.create_ms(), 0);

  v1::PutFileRequest put;
  put.set_sandbox_id("sbx-agent-1");
  put.set_path("/work/in.txt");
  put.set_content("from grpc");
  v1::PutFileResponse put_resp;
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->PutFile(&c2, put, &put_resp).ok());

  v1::ExecRequest ereq;
  ereq.set_sandbox_id("sbx-agent-1");
  for (const char* a : {"/bin/sh", "-c", "cat /work/in.txt; echo err >&2; echo out > /work/out.txt; exit 3"}) {
    ereq.add_argv(a);
  }
  grpc::ClientContext c3;
  auto reader = stub_->Exec(&c3, ereq);
  std::string out, err;
  v1::ExecExit exit;
  v1::ExecChunk chunk;
  int exits = 0;
  while (reader->Read(&chunk)) {
    if (chunk.has_exit()) {
      exit = chunk.exit();
      ++exits;
    }
    out += chunk.stdout();
    err += chunk.stderr();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(exits, 1);
  EXPECT_EQ(out, "from grpc");
  EXPECT_EQ(err, "err\n");
  EXPECT_EQ(exit.exit_code(), 3);
  EXPECT_EQ(exit.reason(), v1::STOP_REASON_NONE);

  v1::GetFileRequest get;
  get.set_sandbox_id("sbx-agent-1");
  get.set_path("/work/out.txt");
  v1::GetFileResponse get_resp;
  grpc::ClientContext c4;
  ASSERT_TRUE(stub_->GetFile(&c4, get, &get_resp).ok());
  EXPECT_EQ(get_resp.content(), "out\n");
  get.set_path("/../../etc/shadow");
  grpc::ClientContext c4b;
  EXPECT_EQ(stub_->GetFile(&c4b, get, &get_resp).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::ListResponse list;
  grpc::ClientContext c5;
  ASSERT_TRUE(stub_->List(&c5, v1::ListRequest(), &list).ok());
  ASSERT_EQ(list.sandboxes_size(), 1);
  EXPECT_EQ(list.sandboxes(0).labels().at("task"), "t1");
  EXPECT_EQ(list.sandboxes(0).resources().memory_bytes(), 256u << 20);

  v1::NodeUsage usage;
  grpc::ClientContext c6;
  ASSERT_TRUE(stub_->Usage(&c6, v1::Empty(), &usage).ok());
  EXPECT_EQ(usage.memory_used(), 256u << 20);
  EXPECT_EQ(usage.slots_used(), 1u);
  EXPECT_GE(usage.partitions_size(), 1);

  v1::SandboxRef ref;
  ref.set_sandbox_id("sbx-agent-1");
  v1::Empty empty;
  grpc::ClientContext c7;
  ASSERT_TRUE(stub_->Destroy(&c7, ref, &empty).ok());
  grpc::ClientContext c8;
  EXPECT_EQ(stub_->Destroy(&c8, ref, &empty).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(agent_->Usage().memory_used(), 0u);

  v1::SandboxEvent ev;
  ASSERT_TRUE(watch->Read(&ev));
  EXPECT_EQ(ev.kind(), v1::SandboxEvent::CREATED);
  EXPECT_EQ(ev.sandbox_id(), "sbx-agent-1");
  EXPECT_EQ(ev.node_id(), "node-a");
  ASSERT_TRUE(watch->Read(&ev));
  EXPECT_EQ(ev.kind(), v1::SandboxEvent::DESTROYED);
  wctx.TryCancel();
}

TEST_F(NodeAgentTest, AdmissionRejectsAboveTheSlotThreshold) {
  v1::AdmitRequest admit;
  admit.mutable_resources()->set_memory_bytes(64 << 20);
  v1::AdmitResponse ar;
  grpc::ClientContext a1;
  ASSERT_TRUE(stub_->Admit(&a1, admit, &ar).ok());
  EXPECT_TRUE(ar.admitted());
  EXPECT_EQ(ar.usage().slots_capacity(), 2u);
  for (const char* id : {"sbx-slot-1", "sbx-slot-2"}) {
    v1::CreateRequest creq;
    creq.set_sandbox_id(id);
    creq.mutable_resources()->set_memory_bytes(64 << 20);
    creq.mutable_resources()->set_cpu_quota_millicores(100);
    v1::CreateResponse cresp;
    grpc::ClientContext c;
    ASSERT_TRUE(stub_->Create(&c, creq, &cresp).ok()) << id;
  }
  v1::CreateRequest third;
  third.set_sandbox_id("sbx-slot-3");
  third.mutable_resources()->set_cpu_quota_millicores(100);
  v1::CreateResponse cresp;
  grpc::ClientContext c3;
  grpc::Status s = stub_->Create(&c3, third, &cresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "not admitted: slots: 3 of 2 (1.50 > 1.00) after placement");
  grpc::ClientContext a2;
  ASSERT_TRUE(stub_->Admit(&a2, admit, &ar).ok());
  EXPECT_FALSE(ar.admitted());
  EXPECT_EQ(ar.usage().slots_used(), 2u);
  // A failed create gives its reservation back.
  v1::CreateRequest bad;
  bad.set_sandbox_id("../bad");
  bad.mutable_resources()->set_cpu_quota_millicores(100);
  grpc::ClientContext c4;
  EXPECT_EQ(stub_->Create(&c4, bad, &cresp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::SandboxRef ref;
  ref.set_sandbox_id("sbx-slot-1");
  v1::Empty empty;
  grpc::ClientContext c5;
  ASSERT_TRUE(stub_->Destroy(&c5, ref, &empty).ok());
  grpc::ClientContext c6;
  EXPECT_EQ(stub_->Create(&c6, bad, &cresp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(agent_->Usage().slots_used(), 1u);

  // A command the runtime stops at its timeout.
  v1::ExecRequest ereq;
  ereq.set_sandbox_id("sbx-slot-2");
  for (const char* a : {"/bin/sh", "-c", "sleep 5"}) ereq.add_argv(a);
  ereq.set_timeout_ms(100);
  grpc::ClientContext c7;
  auto reader = stub_->Exec(&c7, ereq);
  v1::ExecChunk chunk;
  v1::StopReason reason = v1::STOP_REASON_NONE;
  while (reader->Read(&chunk)) {
    if (chunk.has_exit()) reason = chunk.exit().reason();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(reason, v1::TIMEOUT);

  auto m = Scrape();
  EXPECT_EQ(m["flotilla_node_sandboxes_created_total{class=\"best_effort\"}"], "2");
  EXPECT_EQ(m["flotilla_node_sandboxes_created_total{class=\"latency_sensitive\"}"], "0");
  EXPECT_EQ(m["flotilla_node_sandbox_create_seconds_count{class=\"best_effort\"}"], "2");
  EXPECT_EQ(m["flotilla_node_sandbox_create_failures_total{reason=\"admission\"}"], "2");
  EXPECT_EQ(m["flotilla_node_sandbox_create_failures_total{reason=\"runtime\"}"], "1");
  EXPECT_EQ(m["flotilla_node_sandboxes_destroyed_total{class=\"best_effort\"}"], "1");
  EXPECT_EQ(m["flotilla_node_sandbox_destroy_seconds_count"], "1");
  EXPECT_EQ(m["flotilla_node_sandboxes{class=\"best_effort\",state=\"running\"}"], "1");
  EXPECT_EQ(m["flotilla_node_sandboxes{class=\"best_effort\",state=\"starting\"}"], "0");
  EXPECT_EQ(m["flotilla_node_exec_stops_total{reason=\"timeout\"}"], "1");
}

TEST_F(NodeAgentTest, RefusedExtraAllowPortLeavesNoReservation) {
  v1::CreateRequest creq;
  creq.set_sandbox_id("sbx-bad-port");
  creq.mutable_resources()->set_memory_bytes(64 << 20);
  creq.mutable_resources()->set_cpu_quota_millicores(100);
  auto* rule = creq.add_extra_allow();
  rule->set_cidr("10.0.0.0/8");
  rule->set_port(70000);
  v1::CreateResponse cresp;
  grpc::ClientContext c;
  grpc::Status s = stub_->Create(&c, creq, &cresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "extra_allow.port: above 65535");
  const v1::NodeUsage u = agent_->Usage();
  EXPECT_EQ(u.slots_used(), 0u);
  EXPECT_EQ(u.memory_used(), 0u);
  EXPECT_EQ(u.cpu_millicores_used(), 0u);
  EXPECT_TRUE(agent_->SandboxIds().empty());
}

TEST_F(NodeAgentTest, RefusedCpuRequestAboveItsLimitLeavesNoReservation) {
  v1::CreateRequest creq;
  creq.set_sandbox_id("sbx-bad-request");
  creq.mutable_resources()->set_cpu_quota_millicores(500);
  creq.mutable_resources()->set_cpu_request_millicores(600);
  v1::CreateResponse cresp;
  grpc::ClientContext c;
  grpc::Status s = stub_->Create(&c, creq, &cresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "resources.cpu_request_millicores: 600 above resources.cpu_quota_millicores 500");
  EXPECT_EQ(agent_->Usage().cpu_millicores_used(), 0u);
  EXPECT_TRUE(agent_->SandboxIds().empty());
}

// Create's partition check reads the node's usage, which concurrent Creates rewrite while they
// reserve and release: a check outside the lock saw a half-rewritten usage (no partitions) and
// refused a valid partition. The refused writers fail in the runtime (a bad id) after reserving.
TEST(NodeAgentConcurrencyTest, ValidPartitionIsNeverRefusedWhileOthersReserve) {
  flotilla::testing::TempDir dir;
  RuntimeOptions o;
  o.state_dir = dir.path().string();
  o.cgroup_prefix = "flotilla-test-race-" + std::to_string(::getpid());
  auto rt = Runtime::Open(o);
  if (!rt.ok()) GTEST_SKIP() << "sandbox runtime unavailable: " << rt.status();
  NodeAgentOptions ao;
  ao.node_id = "node-race";
  ao.slots_capacity = 64;
  ao.partitions_per_node = 2;
  auto agent = NodeAgent::Create(std::move(*rt), ao);
  ASSERT_TRUE(agent.ok()) << agent.status();
  const int partitions = (*agent)->Usage().partitions_size();
  ASSERT_GE(partitions, 2);
  auto* service = dynamic_cast<v1::NodeAgent::Service*>((*agent)->service());
  ASSERT_NE(service, nullptr);

  std::atomic<bool> stop{false};
  std::atomic<int> wrongly_refused{0};
  std::atomic<int> checks{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&] {
      v1::CreateRequest bad;
      bad.set_sandbox_id("../bad");
      bad.mutable_resources()->set_memory_bytes(1 << 20);
      while (!stop) {
        v1::CreateResponse resp;
        (void)service->Create(nullptr, &bad, &resp);
      }
    });
  }
  threads.emplace_back([&] {
    // Too large to admit: the answer is RESOURCE_EXHAUSTED, never a partition complaint.
    v1::CreateRequest big;
    big.set_numa_partition(static_cast<uint32_t>(partitions - 1));
    big.mutable_resources()->set_memory_bytes(uint64_t{1} << 60);
    for (int i = 0; i < 200000; ++i) {
      v1::CreateResponse resp;
      grpc::Status s = service->Create(nullptr, &big, &resp);
      if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) wrongly_refused.fetch_add(1);
      checks.fetch_add(1);
    }
    stop = true;
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(checks.load(), 200000);
  EXPECT_EQ(wrongly_refused.load(), 0);
  EXPECT_EQ((*agent)->Usage().slots_used(), 0u);
  EXPECT_EQ((*agent)->Usage().memory_used(), 0u);
}

}  // namespace
}  // namespace flotilla::node
