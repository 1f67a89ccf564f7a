#include "flotilla/trainer_bridge/trainer_service.h"

#include "absl/time/clock.h"
#include "flotilla/trainer_bridge/batch_figures.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/tokenizer.h"

namespace flotilla::trainer_bridge {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

BatchOptions MakeBatchOptions(const ExperimentConfig& c) {
  BatchOptions o;
  o.staleness = c.rollout.staleness;
  o.advantages.std_scaling = c.rollout.std_scaling;
  o.advantages.effort = c.effort;
  return o;
}

}  // namespace

TrainerBridgeService::TrainerBridgeService(const ExperimentConfig& config, const std::string& model_name,
                                           const inference::ModelConfig& model_config, inference::Engine& engine,
                                           RolloutController& controller, RolloutRunner& runner,
                                           ExperimentStore* store, TeacherRegistry* teachers, int64_t start_step,
                                           MetricsLog* metrics_log)
    : config_(config), model_name_(model_name), model_config_(model_config), engine_(engine),
      controller_(controller), runner_(runner), store_(store), teachers_(teachers),
      assembler_(MakeBatchOptions(config)), datasets_(config.datasets), metrics_log_(metrics_log) {
  progress_.step = start_step;
  acked_step_ = start_step - 1;
  controller_.SetSuspended(true);  // until weights are loaded and a trainer is attached
}

void TrainerBridgeService::MarkModelLoaded(int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.model_loaded = true;
  progress_.policy_version = version;
}

BridgeProgress TrainerBridgeService::Progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

void TrainerBridgeService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

grpc::Status TrainerBridgeService::NextBatch(grpc::ServerContext* ctx, const v1::NextBatchRequest* req,
                                             grpc::ServerWriter<v1::Batch>* writer) {
  bool reload = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (progress_.trainer_connected) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "a trainer is already attached");
    }
    progress_.trainer_connected = true;
    progress_.trainer_done = false;
    if (req->trainer_version() > progress_.policy_version && !progress_.model_loaded) {
      progress_.policy_version = req->trainer_version();
    }
    acked_step_ = progress_.step - 1;
    reload = progress_.model_loaded;
    if (offloaded_) offloaded_ = false;
  }
  FLOG(info, "trainer attached", {{"trainer", req->trainer_id()}});
  if (reload) {
    if (auto s = runner_.Reload(); !s.ok()) FLOG(warn, "reload after reattach", {{"error", s.ToString()}});
  }
  const size_t groups = req->batch_size() > 0 ? req->batch_size() : config_.rollout.groups_per_step;
  const int64_t prefetch = req->prefetch() > 0 ? req->prefetch() : 1;
  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return ctx->IsCancelled() || shutdown_;
  };
  while (!cancelled()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100),
                   [&] { return shutdown_ || progress_.step - acked_step_ <= prefetch; });
      if (progress_.step - acked_step_ > prefetch) continue;
      if (!progress_.model_loaded) continue;
      // A trainer that reported its last step takes no more batches: none is assembled (its
      // groups would be marked consumed untrained) and the group budget stays.
      if (progress_.trainer_done) continue;
    }
    // Fewer groups outstanding than this batch once the run's group budget is spent: the
    // trainer runs more steps than the experiment says, and the bound goes rather than starve it.
    if (runner_.Stats().completed_groups_waiting + controller_.Stats().groups_outstanding < groups) {
      controller_.LiftSpentGroupBudget();
    }
    std::vector<std::vector<RolloutSample>> taken = runner_.TakeGroups(groups, cancelled);
    if (taken.size() < groups) {
      runner_.Requeue(std::move(taken));
      continue;
    }
    int64_t step, version;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = progress_.step;
      version = progress_.policy_version;
    }
    v1::Batch batch = assembler_.Assemble(taken, step, version);
    if (teachers_ != nullptr && config_.trainer.loss == "opd") {
      for (v1::Sample& s : *batch.mutable_samples()) {
        if (auto st = teachers_->Score(engine_, &s); !st.ok()) {
          FLOG(warn, "teacher scoring failed", {{"sample", s.trajectory_id()}, {"error", st.ToString()}});
        }
      }
    }
    std::map<std::string, double> figures = BatchFigures(batch, version);
    if (!writer->Write(batch)) {
      runner_.Requeue(std::move(taken));
      break;
    }
    std::vector<uint64_t> ids;
    for (const auto& g : taken) ids.push_back(g.front().group);
    if (store_ != nullptr) {
      if (auto s = store_->MarkConsumed(ids, step + 1); !s.ok()) FLOG(error, "mark consumed", {{"error", s.ToString()}});
    }
    taken.clear();  // consumed: released now
    std::lock_guard<std::mutex> lock(mu_);
    progress_.step = step + 1;
    progress_.mean_staleness = figures["staleness_mean"];
    progress_.batch_figures = std::move(figures);
    progress_.last_stale_masked = batch.stale_masked_tokens();
    progress_.stale_masked_total += batch.stale_masked_tokens();
  }
  bool offload = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    progress_.trainer_connected = false;
    offload = !shutdown_ && progress_.model_loaded;
    offloaded_ = offload;
  }
  FLOG(info, "trainer detached", {{"trainer", req->trainer_id()}});
  if (offload) {
    if (auto s = runner_.Offload(); !s.ok()) FLOG(warn, "offload after detach", {{"error", s.ToString()}});
  }
  return grpc::Status::OK;
}

grpc::Status TrainerBridgeService::PublishWeights(grpc::ServerContext*, const v1::PublishWeightsRequest* req,
                                                  v1::PublishWeightsResponse* resp) {
  bool loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loaded = progress_.model_loaded;
  }
  if (req->safetensors_path().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "safetensors_path: required");
  }
  if (!loaded) {
    if (auto s = engine_.LoadModel(model_name_, model_config_, req->safetensors_path(), req->version()); !s.ok()) {
      return ToGrpc(s);
    }
    controller_.SetPolicyVersion(req->version());
    bool connected;
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_.model_loaded = true;
      progress_.policy_version = req->version();
      connected = progress_.trainer_connected;
    }
    if (connected) controller_.SetSuspended(false);
    resp->set_version(req->version());
  } else {
    auto r = runner_.SwitchWeights(req->safetensors_path(), req->version());
    if (!r.ok()) return ToGrpc(r.status());
    resp->set_version(r->version);
    resp->set_switch_ms(r->stall_ms);
    resp->set_interrupted(r->interrupted);
    std::lock_guard<std::mutex> lock(mu_);
    progress_.policy_version = req->version();
    progress_.last_switch_ms = r->stall_ms;
  }
  if (store_ != nullptr) {
    if (auto s = store_->SavePolicy(req->version(), req->safetensors_path()); !s.ok()) return ToGrpc(s);
  }
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status TrainerBridgeService::Report(grpc::ServerContext*, const v1::ReportRequest* req, v1::ReportResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  acked_step_ = std::max(acked_step_, req->step());
  for (const auto& [k, v] : req->metrics()) progress_.trainer_metrics[k] = v;
  if (metrics_log_ != nullptr) {
    MetricsLogLine line;
    line.step = req->step();
    line.unix_ms = absl::ToUnixMillis(absl::Now());
    line.values = progress_.batch_figures;
    for (const auto& [k, v] : req->metrics()) line.values["trainer/" + k] = v;
    line.values["policy_version"] = static_cast<double>(progress_.policy_version);
    line.values["weight_sync_ms"] = progress_.last_switch_ms;
    if (auto s = metrics_log_->Append(line); !s.ok()) FLOG(warn, "metrics log", {{"error", s.ToString()}});
  }
  auto done = req->metrics().find("done");
  if (done != req->metrics().end() && done->second > 0) progress_.trainer_done = true;
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status TrainerBridgeService::WarmStart(grpc::ServerContext*, const v1::WarmStartRequest* req,
                                             v1::WarmStartResponse* resp) {
  if (req->count() > 1'000'000) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "count: at most 1000000");
  std::vector<DatasetConfig> datasets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    datasets = datasets_;
  }
  if (!req->dataset().empty()) {
    std::erase_if(datasets, [&](const DatasetConfig& d) { return d.name != req->dataset(); });
    if (datasets.empty()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("dataset '", req->dataset(), "' is not in the experiment"));
    }
  }
  std::vector<std::unique_ptr<TaskSource>> sources;
  for (size_t i = 0; i < datasets.size(); ++i) {
    auto src = TaskSource::Open(datasets[i].source, req->seed() * 7919 + i);
    if (!src.ok()) return ToGrpc(src.status());
    sources.push_back(std::move(*src));
  }
  std::vector<double> credit(datasets.size(), 0.0);
  const auto& levels = config_.effort.levels;
  for (uint32_t n = 0; n < req->count(); ++n) {
    size_t pick = 0;
    for (size_t i = 0; i < datasets.size(); ++i) {
      credit[i] += datasets[i].weight;
      if (credit[i] > credit[pick]) pick = i;
    }
    double total = 0;
    for (const auto& d : datasets) total += d.weight;
    credit[pick] -= total;
    Task t = sources[pick]->Next();
    uint32_t effort = levels.empty() ? 0 : levels[n % levels.size()];
    absl::StatusOr<std::vector<worker::TurnExample>> examples = runner_.WarmStartExamples(t, effort);
    if (!examples.ok()) {
      return ToGrpc(Annotate(examples.status(), absl::StrCat("datasets '", datasets[pick].name, "': task ", t.id)));
    }
    // A multi-turn reference episode gives one example per assistant turn; `count` bounds the
    // examples, so the last episode may be cut short.
    for (worker::TurnExample& e : *examples) {
      if (resp->examples_size() >= static_cast<int>(req->count())) break;
      v1::WarmStartExample* ex = resp->add_examples();
      ex->set_dataset(datasets[pick].name);
      for (int32_t id : e.prompt) ex->add_prompt(id);
      for (int32_t id : e.target) ex->add_target(id);
    }
    if (resp->examples_size() >= static_cast<int>(req->count())) break;
  }
  return grpc::Status::OK;
}

grpc::Status TrainerBridgeService::Reconfigure(grpc::ServerContext*, const v1::ReconfigureRequest* req,
                                               v1::ReconfigureResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DatasetConfig> next = datasets_;
  for (int i = 0; i < req->datasets_size(); ++i) {
    const v1::DatasetSpec& spec = req->datasets(i);
    auto it = std::find_if(next.begin(), next.end(), [&](const DatasetConfig& d) { return d.name == spec.name(); });
    if (it == next.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("datasets[", i, "].name: '", spec.name(), "' is not in the experiment"));
    }
    if (spec.weight() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("datasets[", i, "].weight: must be >= 0"));
    }
    if (spec.weight() > 0) it->weight = spec.weight();
    it->max_in_flight = spec.max_in_flight();
  }
  if (auto s = controller_.Reconfigure(next); !s.ok()) return ToGrpc(s);
  if (req->set_teachers()) {
    if (teachers_ == nullptr) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this experiment has no teachers");
    std::vector<std::string> names(req->active_teachers().begin(), req->active_teachers().end());
    if (auto s = teachers_->SetActive(names); !s.ok()) return ToGrpc(s);
  }
  datasets_ = next;
  if (teachers_ != nullptr) teachers_->SetDatasets(next);
  for (const auto& d : datasets_) {
    v1::DatasetSpec* spec = resp->add_datasets();
    spec->set_name(d.name);
    spec->set_weight(d.weight);
    spec->set_max_in_flight(d.max_in_flight);
  }
  if (teachers_ != nullptr) {
    for (const auto& t : teachers_->Active()) resp->add_active_teachers(t);
  }
  FLOG(info, "experiment reconfigured", {{"datasets", datasets_.size()}});
  return grpc::Status::OK;
}

grpc::Status TrainerBridgeService::Status(grpc::ServerContext*, const v1::StatusRequest*, v1::BridgeStatus* resp) {
  ControllerStats cs = controller_.Stats();
  RunnerStats rs = runner_.Stats();
  std::lock_guard<std::mutex> lock(mu_);
  resp->set_experiment(config_.name);
  resp->set_policy_version(progress_.policy_version);
  resp->set_step(progress_.step);
  resp->set_in_flight(cs.in_flight);
  resp->set_samples_completed(rs.samples_completed);
  resp->set_groups_dispatched(cs.groups_dispatched);
  resp->set_trainer_connected(progress_.trainer_connected);
  resp->set_suspended(cs.suspended);
  resp->set_mean_reward_recent(rs.recent_reward);
  for (const auto& [d, n] : cs.in_flight_by_dataset) (*resp->mutable_in_flight_by_dataset())[d] = n;
  for (const auto& [d, n] : cs.groups_by_dataset) (*resp->mutable_groups_by_dataset())[d] = n;
  if (teachers_ != nullptr) {
    for (const auto& t : teachers_->Active()) resp->add_active_teachers(t);
  }
  resp->set_model_config_json(model_config_.ToJson());
  std::vector<std::string> active;
  if (teachers_ != nullptr) active = teachers_->Active();
  for (const auto& t : config_.teachers) {
    v1::TeacherInfo* info = resp->add_teachers();
    info->set_name(t.name);
    info->set_model_config(t.model_config);
    info->set_weights(t.weights);
    for (const auto& d : t.domains) info->add_domains(d);
    info->set_active(std::find(active.begin(), active.end(), t.name) != active.end());
  }
  for (const auto& d : datasets_) {
    v1::DatasetSpec* spec = resp->add_datasets();
    spec->set_name(d.name);
    spec->set_weight(d.weight);
    spec->set_max_in_flight(d.max_in_flight);
    spec->set_domain(d.domain);
  }
  resp->set_state_dir(config_.state_dir);
  return grpc::Status::OK;
}

}  // namespace flotilla::trainer_bridge
