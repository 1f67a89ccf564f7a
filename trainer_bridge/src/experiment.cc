#include "flotilla/trainer_bridge/experiment.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::trainer_bridge {

absl::StatusOr<inference::ModelConfig> PolicyModelConfig(const ExperimentConfig& config) {
  std::string json = config.policy.model_json;
  if (!config.policy.model_config.empty()) {
    std::ifstream in(config.policy.model_config);
    if (!in) return absl::NotFoundError(absl::StrCat("policy.model_config '", config.policy.model_config, "' cannot be read"));
    std::stringstream ss;
    ss << in.rdbuf();
    json = ss.str();
  }
  auto c = inference::ModelConfig::FromJson(json);
  if (!c.ok()) return Annotate(c.status(), absl::StrCat(config.file, ": policy.model"));
  RETURN_IF_ERROR(Annotate(c->Validate(), absl::StrCat(config.file, ": policy.model")));
  return c;
}

absl::StatusOr<std::unique_ptr<Experiment>> Experiment::Start(const ExperimentConfig& config, inference::Engine& engine,
                                                              worker::SandboxClient* sandboxes,
                                                              const ExperimentOptions& options) {
  std::unique_ptr<Experiment> e(new Experiment());
  e->config_ = config;
  ASSIGN_OR_RETURN(inference::ModelConfig model_config, PolicyModelConfig(config));
  std::error_code ec;
  std::filesystem::create_directories(config.state_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("state_dir '", config.state_dir, "': ", ec.message()));
  if (options.store != nullptr) {
    e->store_ = std::make_unique<ExperimentStore>(options.store, config.name);
  } else {
    ASSIGN_OR_RETURN(e->store_, ExperimentStore::Open(
                                    (std::filesystem::path(config.state_dir) / "trajectories.db").string(), config.name));
  }
  ASSIGN_OR_RETURN(StoredState stored, e->store_->LoadState());

  e->controller_ = std::make_unique<RolloutController>(config.rollout, config.datasets, config.effort.levels,
                                                       SystemClock::Get());
  e->controller_->RestoreCounters(stored.groups_dispatched, stored.groups_by_dataset);
  std::map<std::string, std::unique_ptr<TaskSource>> tasks;
  for (size_t i = 0; i < config.datasets.size(); ++i) {
    // A restart continues with a fresh task stream (different seed), not a replay.
    uint64_t seed = config.seed * 1'000'003 + i * 7919 + stored.groups_dispatched;
    auto src = TaskSource::Open(config.datasets[i].source, seed, options.prepare_task);
    if (!src.ok()) return Annotate(src.status(), absl::StrCat(config.file, ": datasets[", i, "].source"));
    tasks[config.datasets[i].name] = std::move(*src);
  }
  if (sandboxes == nullptr) {
    return absl::FailedPreconditionError("the experiment's samples need sandboxes; no sandbox client is available");
  }
  if (!config.teachers.empty()) e->teachers_ = std::make_unique<TeacherRegistry>(config.teachers, config.datasets);

  RunnerOptions ro;
  ro.model = options.model_name;
  ro.experiment = config.name;
  ro.system_prompt = config.system_prompt;
  ro.system_template = config.system_template;
  ro.instance_template = config.instance_template;
  ro.scaffold = config.scaffold;
  ro.metrics = options.metrics;
  ro.sandbox_policy = config.sandbox_policy;
  ro.max_new_tokens = config.rollout.max_new_tokens;
  ro.max_turns = config.rollout.max_turns;
  ro.temperature = config.rollout.temperature;
  ro.seed = config.seed;
  ro.failure_reward = config.rollout.failure_reward;
  ro.episodes = config.rollout.max_in_flight;
  ro.routing_width = model_config.routing_width();
  if (IsAgentCliScaffold(config.scaffold)) {
    if (!options.agent_cli.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat(config.file, ": scaffold: ", config.scaffold, " needs the agent CLI installed (--agents-dir)"));
    }
    ro.agent_cli = options.agent_cli;
  }
  e->runner_ = std::make_unique<RolloutRunner>(ro, engine, *e->controller_, std::move(tasks), *sandboxes,
                                               e->store_.get(), SystemClock::Get());
  ASSIGN_OR_RETURN(e->metrics_log_, MetricsLog::Open((std::filesystem::path(config.state_dir) / "metrics.jsonl").string()));
  e->service_ = std::make_unique<TrainerBridgeService>(config, options.model_name, model_config, engine,
                                                       *e->controller_, *e->runner_, e->store_.get(),
                                                       e->teachers_.get(), stored.step, e->metrics_log_.get());
  if (options.metrics != nullptr) {
    e->collector_ = options.metrics->AddCollector([svc = e->service_.get()](MetricsSnapshotWriter& w) {
      BridgeProgress p = svc->Progress();
      w.Gauge("flotilla_bridge_step", "Trainer steps the bridge has sent batches for", {}, static_cast<double>(p.step));
      w.Gauge("flotilla_bridge_policy_version", "Policy version in service", {}, static_cast<double>(p.policy_version));
      w.Gauge("flotilla_bridge_staleness_mean", "Mean policy lag of the last batch's loss tokens", {}, p.mean_staleness);
      w.Counter("flotilla_bridge_stale_masked_tokens_total", "Loss tokens masked by the off-policy bound", {},
                static_cast<double>(p.stale_masked_total));
      w.Gauge("flotilla_bridge_weight_sync_ms", "Generation stall of the last weight switch", {}, p.last_switch_ms);
      w.Gauge("flotilla_bridge_trainer_connected", "Whether a trainer holds the batch stream", {}, p.trainer_connected ? 1 : 0);
      for (const auto& [figure, v] : p.batch_figures) {
        if (figure.rfind("reward_mean/", 0) == 0) {
          w.Gauge("flotilla_bridge_reward_mean", "Mean reward of the last batch per dataset", {{"dataset", figure.substr(12)}}, v);
        } else {
          w.Gauge("flotilla_bridge_batch", "Figures of the last batch (BatchFigures)", {{"figure", figure}}, v);
        }
      }
      for (const auto& [metric, v] : p.trainer_metrics) {
        w.Gauge("flotilla_bridge_trainer", "The trainer's last reported figures", {{"metric", metric}}, v);
      }
    });
  }
  if (!stored.weights_path.empty() && std::filesystem::exists(stored.weights_path)) {
    RETURN_IF_ERROR(Annotate(engine.LoadModel(options.model_name, model_config, stored.weights_path, stored.policy_version),
                             "resuming the experiment's last weights"));
    e->controller_->SetPolicyVersion(stored.policy_version);
    e->service_->MarkModelLoaded(stored.policy_version);
    FLOG(info, "resuming experiment", {{"version", stored.policy_version}, {"step", stored.step},
                                       {"groups_dispatched", stored.groups_dispatched}});
  }
  RETURN_IF_ERROR(e->runner_->Start());
  // The trainer takes rl_steps batches of groups_per_step groups; those stored from before are
  // handed over first. No group past them is dispatched (the bridge lifts the bound if a
  // trainer asks for more).
  const uint64_t wanted = static_cast<uint64_t>(config.trainer.rl_steps) * config.rollout.groups_per_step;
  const uint64_t requeued = e->runner_->Stats().completed_groups_waiting;
  e->controller_->SetGroupBudget(wanted > requeued ? wanted - requeued : 0);

  std::string listen = options.listen.empty() ? config.trainer.address : options.listen;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(e->service_.get());
  builder.SetMaxSendMessageSize(512 << 20);
  builder.SetMaxReceiveMessageSize(64 << 20);
  e->server_ = builder.BuildAndStart();
  if (e->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("trainer.address: cannot listen on '", listen, "'"));
  }
  e->address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  FLOG(info, "trainer bridge listening", {{"address", e->address_}, {"experiment", config.name}});
  return e;
}

Experiment::~Experiment() { Stop(); }

void Experiment::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (service_) service_->Shutdown();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (runner_) runner_->Stop();
  if (controller_ && store_) {
    ControllerStats s = controller_->Stats();
    (void)store_->SaveCounters(s.groups_dispatched, s.groups_by_dataset);
  }
}

absl::StatusOr<RunSummary> Experiment::Summary() const {
  ASSIGN_OR_RETURN(std::vector<double> rewards, store_->Rewards());
  ASSIGN_OR_RETURN(EpisodeFigures figures, store_->Figures());
  RunSummary s;
  s.samples = static_cast<int64_t>(rewards.size());
  s.steps = service_->Progress().step;
  s.scaffold = config_.scaffold;
  s.turns_mean = figures.turns_mean;
  s.tool_calls_mean = figures.tool_calls_mean;
  s.sandboxes = figures.sandboxes;
  s.failed = figures.failed;
  if (rewards.empty()) return s;
  size_t k = std::max<size_t>(1, rewards.size() / 10);
  double a = 0, b = 0;
  for (size_t i = 0; i < k; ++i) {
    a += rewards[i];
    b += rewards[rewards.size() - 1 - i];
  }
  s.reward_start = a / static_cast<double>(k);
  s.reward_end = b / static_cast<double>(k);
  return s;
}

bool Experiment::Drain(int64_t timeout_ms, const std::function<bool()>& give_up) {
  controller_->SetSuspended(true);
  service_->Shutdown();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    ControllerStats c = controller_->Stats();
    RunnerStats r = runner_->Stats();
    // Stored groups are counted by the runner only after PutGroup, so equal counts mean every
    // finished sample has reached the store.
    if (c.in_flight == 0 && c.held == 0 && c.ready_groups == 0 && r.samples_completed == c.samples_finished) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline || (give_up && give_up())) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status Experiment::MarkFinished() {
  ControllerStats s = controller_->Stats();
  RETURN_IF_ERROR(store_->SaveCounters(s.groups_dispatched, s.groups_by_dataset));
  return store_->SetFinished(true);
}

}  // namespace flotilla::trainer_bridge
