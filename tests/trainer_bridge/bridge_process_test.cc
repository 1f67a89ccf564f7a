// The bridge as a real process (`flotilla bridge serve`) over real gRPC: reconfiguration of the
// mixture and the active teachers mid-run, and kill -9 followed by a restart that loses no
// completed trajectory and trains on the stored, unconsumed groups first.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "flotilla/proto/trainer.grpc.pb.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

using testing::Env;

// A `flotilla bridge serve` child; killed (SIGKILL) on destruction if still running.
class BridgeProcess {
 public:
  explicit BridgeProcess(const std::string& yaml) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
      execl(bin.c_str(), bin.c_str(), "bridge", "serve", yaml.c_str(), "--listen", "127.0.0.1:0", nullptr);
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    std::array<char, 512> line;
    while (out != nullptr && fgets(line.data(), line.size(), out) != nullptr) {
      std::string l = line.data();
      auto at = l.find("listening on ");
      if (at != std::string::npos) {
        address_ = l.substr(at + 13);
        while (!address_.empty() && (address_.back() == '\n' || address_.back() == '\r')) address_.pop_back();
        break;
      }
    }
    out_ = out;
  }
  ~BridgeProcess() {
    if (pid_ > 0) Kill(SIGKILL);
    if (out_ != nullptr) fclose(out_);
  }
  void Kill(int sig) {
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string address_;
};

class BridgeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string cfg = R"({"vocab_size":272,"n_layers":1,"d_model":32,"n_heads":2,"n_kv_heads":2,"head_dim":16,)"
                      R"("n_experts":4,"top_k":2,"n_shared_experts":1,"expert_hidden":32,"max_context":64})";
    std::ofstream(dir_.file("model.json")) << cfg;
    std::string cmd = "PYTHONPATH='" + Env("FLOTILLA_SOURCE_DIR", ".") +
                      "/trainer_bridge/python' /usr/bin/python3 -m flotilla_trainer.init_model --out '" +
                      dir_.file("w0") + "' --config '" + dir_.file("model.json") + "' --seed 1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    yaml_ = dir_.file("exp.yaml");
    std::ofstream(yaml_) << "name: proc\nstate_dir: state\npolicy: {model_config: model.json}\n"
                            "datasets:\n"
                            "  - {name: add, source: \"builtin:arith?ops=+\", weight: 1}\n"
                            "  - {name: sub, source: \"builtin:arith?ops=-\", weight: 1}\n"
                            "rollout: {group_size: 4, groups_per_step: 2, max_in_flight: 16, staleness: 50, max_new_tokens: 3}\n"
                            "teachers:\n"
                            "  - {name: t1, domains: [add], model_config: model.json, weights: w0.safetensors}\n"
                            "  - {name: t2, domains: [sub], model_config: model.json, weights: w0.safetensors}\n";
  }

  static std::unique_ptr<v1::TrainerBridge::Stub> Stub(const std::string& addr) {
    return v1::TrainerBridge::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  }
  static v1::BridgeStatus Status(v1::TrainerBridge::Stub& s) {
    grpc::ClientContext ctx;
    v1::BridgeStatus st;
    EXPECT_TRUE(s.Status(&ctx, v1::StatusRequest(), &st).ok());
    return st;
  }
  static void WaitSamples(v1::TrainerBridge::Stub& s, uint64_t n) {
    for (int i = 0; i < 1500 && Status(s).samples_completed() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  testing::TempDir dir_;
  std::string yaml_;
};

TEST_F(BridgeProcessTest, ReconfigureMidRunThenKill9AndRestartLosesNothing) {
  auto bridge = std::make_unique<BridgeProcess>(yaml_);
  ASSERT_FALSE(bridge->address().empty());
  auto stub = Stub(bridge->address());
  {
    grpc::ClientContext ctx;
    v1::PublishWeightsRequest req;
    req.set_version(0);
    req.set_safetensors_path(dir_.file("w0.safetensors"));
    v1::PublishWeightsResponse resp;
    ASSERT_TRUE(stub->PublishWeights(&ctx, req, &resp).ok());
  }
  // Attach a trainer that takes one batch and holds the stream (no ack: nothing more is sent).
  grpc::ClientContext tctx;
  v1::NextBatchRequest nb;
  nb.set_trainer_id("test");
  auto reader = stub->NextBatch(&tctx, nb);
  v1::Batch first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_EQ(first.step(), 0);
  EXPECT_EQ(first.samples_size(), 8);

  // Reconfigure while rollouts run: sub gets 9x the weight, add is capped at one group.
  v1::BridgeStatus before = Status(*stub);
  EXPECT_TRUE(before.trainer_connected());
  {
    grpc::ClientContext ctx;
    v1::ReconfigureRequest req;
    auto* sub = req.add_datasets();
    sub->set_name("sub");
    sub->set_weight(9);
    auto* add = req.add_datasets();
    add->set_name("add");
    add->set_max_in_flight(4);
    req.set_set_teachers(true);
    req.add_active_teachers("t2");
    v1::ReconfigureResponse resp;
    ASSERT_TRUE(stub->Reconfigure(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.active_teachers_size(), 1);
    EXPECT_EQ(resp.active_teachers(0), "t2");
  }
  {
    grpc::ClientContext ctx;
    v1::ReconfigureRequest req;
    req.add_datasets()->set_name("nope");
    v1::ReconfigureResponse resp;
    EXPECT_EQ(stub->Reconfigure(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  WaitSamples(*stub, before.samples_completed() + 160);
  v1::BridgeStatus after = Status(*stub);
  uint64_t d_add = after.groups_by_dataset().at("add") - before.groups_by_dataset().at("add");
  uint64_t d_sub = after.groups_by_dataset().at("sub") - before.groups_by_dataset().at("sub");
  EXPECT_GT(d_sub, 3 * d_add) << "add +" << d_add << " sub +" << d_sub;
  EXPECT_LE(after.in_flight_by_dataset().at("add"), 4u);
  ASSERT_EQ(after.active_teachers_size(), 1);

  // kill -9: every trajectory the bridge reported complete is in SQLite.
  uint64_t completed = after.samples_completed();
  bridge->Kill(SIGKILL);
  reader.reset();
  std::string db = dir_.file("state/trajectories.db");
  std::set<uint64_t> unconsumed;
  int64_t stored = 0;
  {
    auto store = ExperimentStore::Open(db, "proc");
    ASSERT_TRUE(store.ok()) << store.status();
    stored = *(*store)->CountTrajectories();
    EXPECT_GE(stored, static_cast<int64_t>(completed));
    auto groups = (*store)->LoadUnconsumed();
    ASSERT_TRUE(groups.ok());
    for (const auto& g : *groups) unconsumed.insert(g.front().group);
  }
  ASSERT_GE(unconsumed.size(), 2u);

  // Restart: the weights come back, and the first batch is made of stored unconsumed groups.
  bridge = std::make_unique<BridgeProcess>(yaml_);
  ASSERT_FALSE(bridge->address().empty());
  stub = Stub(bridge->address());
  v1::BridgeStatus resumed = Status(*stub);
  EXPECT_EQ(resumed.step(), 1);
  grpc::ClientContext t2;
  auto reader2 = stub->NextBatch(&t2, nb);
  v1::Batch next;
  ASSERT_TRUE(reader2->Read(&next));
  EXPECT_EQ(next.step(), 1);
  for (const auto& s : next.samples()) {
    EXPECT_TRUE(unconsumed.contains(std::stoull(s.group_id().substr(1)))) << s.group_id();
  }
  t2.TryCancel();
  bridge->Kill(SIGTERM);
  auto store = ExperimentStore::Open(db, "proc");
  ASSERT_TRUE(store.ok());
  EXPECT_GE(*(*store)->CountTrajectories(), stored);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
