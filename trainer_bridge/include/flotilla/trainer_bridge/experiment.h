// Experiment: one running RL experiment on an engine — its records in the trajectory store, the rollout
// controller and runner (every sample a worker episode in its own sandbox), the OPD teachers
// and the TrainerBridge gRPC server — wired from an ExperimentConfig.
//
//   ASSIGN_OR_RETURN(auto exp, Experiment::Start(cfg, engine, &sandboxes, {}));
//   ... a trainer connects to exp->address() ...
//   exp->Stop();
//
// Restart: when the state directory holds an unfinished experiment, Start resumes it: the last
// published weights are reloaded, counters continue, and stored groups not yet trained on are
// sent first. Thread-safe; the engine and the sandbox client (the scheduler's front door the
// samples' sandboxes come from) must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/inference/engine.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_runner.h"
#include "flotilla/trainer_bridge/teacher_registry.h"
#include "flotilla/common/metrics.h"
#include "flotilla/trainer_bridge/trainer_service.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::trainer_bridge {

struct ExperimentOptions {
  std::string model_name = "policy";
  // Overrides trainer.address ("127.0.0.1:0" picks a free port).
  std::string listen;
  // The one trajectory store the experiment's samples go to (not owned; must outlive the
  // experiment). Null: <state_dir>/trajectories.db, opened by the experiment.
  worker::TrajectoryStore* store = nullptr;
  // Where the bridge's figures go (flotilla_bridge_*); null: none. Must outlive the experiment.
  // Whatever this is, every trainer step also appends a line to <state_dir>/metrics.jsonl.
  MetricsRegistry* metrics = nullptr;
  // Readies every task of a folder dataset before the first sample (its built environment;
  // see TaskPreparer). Null: folder tasks run in the sandbox's default image.
  TaskPreparer prepare_task;
  // scaffold: an agent CLI (pi): how to run it in each sample's sandbox (installed in the
  // task's image by prepare_task). Required for such a scaffold, unused otherwise.
  std::optional<worker::ExternalAgentSpec> agent_cli;
};

struct RunSummary {
  double reward_start = 0;   // mean reward over the first 10% of samples
  double reward_end = 0;     // ... and the last 10%
  int64_t samples = 0;
  int64_t steps = 0;
  std::string scaffold;
  double turns_mean = 0;      // model turns per sample
  double tool_calls_mean = 0; // commands per sample
  int64_t sandboxes = 0;      // sandboxes the scheduler placed for the samples
  int64_t failed = 0;         // samples that ended failed (stored with the failure reward)
};

class Experiment {
 public:
  static absl::StatusOr<std::unique_ptr<Experiment>> Start(const ExperimentConfig& config, inference::Engine& engine,
                                                           worker::SandboxClient* sandboxes,
                                                           const ExperimentOptions& options);
  ~Experiment();
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;

  [[nodiscard]] std::string address() const { return address_; }
  [[nodiscard]] BridgeProgress Progress() const { return service_->Progress(); }
  [[nodiscard]] ControllerStats ControllerStatsNow() const { return controller_->Stats(); }
  [[nodiscard]] RunnerStats RunnerStatsNow() const { return runner_->Stats(); }
  [[nodiscard]] absl::StatusOr<RunSummary> Summary() const;
  // Marks the experiment finished in its store (a later Start begins afresh only if asked).
  absl::Status MarkFinished();
  // The first half of an orderly stop: no new prompt is dispatched and no further batch goes
  // to the trainer (a detaching trainer no longer offloads the rollouts); samples already
  // generating finish, are verified and stored. Returns true once nothing is in flight and
  // every finished sample is stored, false when `timeout_ms` passed first or `give_up()`
  // turned true. Stop() still follows.
  bool Drain(int64_t timeout_ms, const std::function<bool()>& give_up);
  void Stop();

  RolloutRunner& runner() { return *runner_; }
  ExperimentStore& store() { return *store_; }

 private:
  Experiment() = default;

  ExperimentConfig config_;
  std::unique_ptr<ExperimentStore> store_;
  std::unique_ptr<RolloutController> controller_;
  std::unique_ptr<TeacherRegistry> teachers_;
  std::unique_ptr<RolloutRunner> runner_;
  std::unique_ptr<MetricsLog> metrics_log_;
  std::unique_ptr<TrainerBridgeService> service_;
  MetricsRegistry::CollectorHandle collector_;  // reads service_: destroyed before it
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  bool stopped_ = false;
};

// Reads the policy's ModelConfig from the experiment (file or inline JSON).
absl::StatusOr<inference::ModelConfig> PolicyModelConfig(const ExperimentConfig& config);

}  // namespace flotilla::trainer_bridge
