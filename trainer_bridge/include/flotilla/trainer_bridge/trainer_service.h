// TrainerBridgeService: the gRPC face of a running experiment (common/proto/trainer.proto).
//
//  - NextBatch: the trainer's one long-lived stream. While it is open the trainer is attached;
//    when it closes the bridge suspends dispatch and offloads every in-flight sequence
//    (RolloutRunner::Offload) until a trainer attaches again (Reload). Batches are written
//    only while the trainer holds fewer than `prefetch` unacknowledged ones, each assembled
//    at send time against the trainer's current version (stale tokens loss-masked) and, for
//    OPD, scored by the sample's teacher. Groups sent are marked consumed in the store and
//    released from memory at once.
//  - PublishWeights: the first call loads the policy into the engine and starts dispatch;
//    later calls are checkpoint switches (interrupt, swap, resume without re-prefill).
//  - Report: acknowledges a step and records the trainer's metrics.
//  - WarmStart, Reconfigure, Status: see the proto.
//
// Thread-safe. Everything passed in must outlive the service.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "flotilla/inference/engine.h"
#include "flotilla/common/metrics_log.h"
#include "flotilla/proto/trainer.grpc.pb.h"
#include "flotilla/trainer_bridge/batch_assembler.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_runner.h"
#include "flotilla/trainer_bridge/teacher_registry.h"
#include "flotilla/trainer_bridge/experiment_store.h"

namespace flotilla::trainer_bridge {

struct BridgeProgress {
  int64_t step = 0;
  int64_t policy_version = 0;
  bool trainer_connected = false;
  bool model_loaded = false;
  double last_switch_ms = 0;
  double mean_staleness = 0;          // mean (trainer version - token version) of the last batch
  uint32_t last_stale_masked = 0;
  uint64_t stale_masked_total = 0;
  std::map<std::string, double> trainer_metrics;
  std::map<std::string, double> batch_figures;  // BatchFigures of the last batch sent
  bool trainer_done = false;          // the trainer reported metric "done" = 1
};

class TrainerBridgeService final : public v1::TrainerBridge::Service {
 public:
  TrainerBridgeService(const ExperimentConfig& config, const std::string& model_name,
                       const inference::ModelConfig& model_config, inference::Engine& engine,
                       RolloutController& controller, RolloutRunner& runner, ExperimentStore* store,
                       TeacherRegistry* teachers, int64_t start_step, MetricsLog* metrics_log = nullptr);

  grpc::Status NextBatch(grpc::ServerContext* ctx, const v1::NextBatchRequest* req,
                         grpc::ServerWriter<v1::Batch>* writer) override;
  grpc::Status PublishWeights(grpc::ServerContext* ctx, const v1::PublishWeightsRequest* req,
                              v1::PublishWeightsResponse* resp) override;
  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportResponse* resp) override;
  grpc::Status WarmStart(grpc::ServerContext* ctx, const v1::WarmStartRequest* req,
                         v1::WarmStartResponse* resp) override;
  grpc::Status Reconfigure(grpc::ServerContext* ctx, const v1::ReconfigureRequest* req,
                           v1::ReconfigureResponse* resp) override;
  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest* req, v1::BridgeStatus* resp) override;

  // The weights were restored from the store at start-up (restart): dispatch may run once a
  // trainer attaches.
  void MarkModelLoaded(int64_t version);
  [[nodiscard]] BridgeProgress Progress() const;
  // Unblocks NextBatch streams (shutdown).
  void Shutdown();

 private:
  const ExperimentConfig config_;
  const std::string model_name_;
  const inference::ModelConfig model_config_;
  inference::Engine& engine_;
  RolloutController& controller_;
  RolloutRunner& runner_;
  ExperimentStore* store_;
  TeacherRegistry* teachers_;
  BatchAssembler assembler_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  BridgeProgress progress_;           // guarded by mu_
  int64_t acked_step_ = -1;           // guarded by mu_
  std::vector<DatasetConfig> datasets_;  // guarded by mu_
  // One line per trainer Report: the trainer's figures, the last batch's and the bridge's
  // (not owned; may be null).
  MetricsLog* const metrics_log_;
  bool shutdown_ = false;             // guarded by mu_
  bool offloaded_ = false;            // guarded by mu_
};

}  // namespace flotilla::trainer_bridge
