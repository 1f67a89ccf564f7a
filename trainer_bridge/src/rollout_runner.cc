#include "flotilla/trainer_bridge/rollout_runner.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "episode_pool.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/chat_template.h"
#include "flotilla/trainer_bridge/advantages.h"
#include "flotilla/worker/scaffold.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr int64_t kCreateBackoffMs = 100;
// Threads destroying finished samples' sandboxes (a Destroy is two RPC hops, the node's part
// being a hand-back to its warm pool).
constexpr uint32_t kReleaseThreads = 2;

std::string GroupId(uint64_t group) { return absl::StrCat("g", group); }

// `name` in lower case with anything outside [a-z0-9-_.] as '-' (a safe id's characters).
std::string SafeName(const std::string& name) {
  std::string out = absl::AsciiStrToLower(name.substr(0, 100));
  for (char& c : out) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') c = '-';
  }
  return out.empty() ? "experiment" : out;
}

}  // namespace

RolloutRunner::RolloutRunner(RunnerOptions options, inference::Engine& engine, RolloutController& controller,
                             std::map<std::string, std::unique_ptr<TaskSource>> tasks,
                             worker::SandboxClient& sandboxes, ExperimentStore* store, const Clock& clock)
    : options_(std::move(options)), engine_(engine), controller_(controller), tasks_(std::move(tasks)),
      sandboxes_(sandboxes), store_(store), clock_(clock) {
  generator_ = worker::NewEngineTokenGenerator(&engine_, options_.model, options_.model, &gate_);
  worker::ChatServiceOptions co;
  co.clock = &clock_;
  co.store = store_ != nullptr ? &store_->trajectories() : nullptr;
  co.experiment = options_.experiment;
  co.scaffold = options_.scaffold;
  co.experts_per_token = options_.routing_width;
  co.metrics = options_.metrics;
  chat_ = std::make_unique<worker::ChatService>(generator_.get(), co);
  releases_ = std::make_unique<EpisodePool>(kReleaseThreads);
  pool_ = std::make_unique<EpisodePool>(options_.episodes);
}

RolloutRunner::~RolloutRunner() { Stop(); }

std::string RolloutRunner::SystemText(uint32_t effort) const {
  if (effort == 0) return options_.system_prompt;
  return options_.system_prompt.empty() ? EffortPromptLine(effort)
                                        : absl::StrCat(options_.system_prompt, "\n", EffortPromptLine(effort));
}

std::vector<int32_t> RolloutRunner::RenderPrompt(const Task& task, uint32_t effort) const {
  std::vector<inference::ChatMessage> msgs;
  std::string system = SystemText(effort);
  if (!system.empty()) msgs.push_back({inference::ChatMessage::Role::kSystem, system, {}, {}});
  msgs.push_back({inference::ChatMessage::Role::kUser, task.prompt, {}, {}});
  return inference::RenderConversation(msgs, /*add_generation_prompt=*/true);
}

worker::ScaffoldOptions RolloutRunner::EpisodeOptions(uint32_t effort) const {
  worker::ScaffoldOptions so;
  so.scaffold = options_.scaffold;
  so.agent = "model";
  so.system_prompt = SystemText(effort);
  so.system_template = options_.system_template;
  so.instance_template = options_.instance_template;
  so.max_steps = options_.max_turns;
  so.max_tokens = options_.max_new_tokens;
  so.temperature = options_.temperature;
  so.policy_name = options_.sandbox_policy;
  so.experiment = options_.experiment;
  so.clock = &clock_;
  if (options_.agent_cli.has_value()) {
    so.agent = "cli";
    so.agent_cli = &*options_.agent_cli;
    so.worker_port = wire_port_;
  }
  return so;
}

absl::StatusOr<std::vector<worker::TurnExample>> RolloutRunner::WarmStartExamples(const Task& task,
                                                                                  uint32_t effort) const {
  if (options_.scaffold == "single-turn" || task.terminal.reference_steps.empty()) {
    worker::TurnExample ex{RenderPrompt(task, effort), inference::Encode(task.answer)};
    ex.target.push_back(inference::kEndTurn);
    return std::vector<worker::TurnExample>{std::move(ex)};
  }
  return worker::ReferenceTurnExamples(SandboxTaskOf(task), EpisodeOptions(effort));
}

absl::Status RolloutRunner::Start() {
  if (store_ != nullptr) {
    ASSIGN_OR_RETURN(auto groups, store_->LoadUnconsumed());
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& g : groups) completed_.push_back(std::move(g));
    if (!completed_.empty()) FLOG(info, "requeued stored groups", {{"groups", completed_.size()}});
  }
  if (options_.agent_cli.has_value()) {
    wire_ = std::make_unique<worker::WireApi>(chat_.get());
    ASSIGN_OR_RETURN(wire_server_, worker::ServeWireApi("127.0.0.1:0", wire_.get(), options_.metrics));
    wire_port_ = wire_server_->port();
  }
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void RolloutRunner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  // Parked and running generations end cancelled, so every episode returns (its sample ends
  // INTERRUPTED, counted in cancelled_samples) and its sandbox is destroyed.
  gate_.Shutdown(engine_);
  pool_->Join();
  releases_->Join();  // every sample's sandbox destroyed
  uint64_t cancelled = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = stats_.cancelled_samples;
  }
  if (cancelled > 0) {
    FLOG(info, absl::StrCat("rollout stopped: ", cancelled, " samples in flight cancelled"),
         {{"experiment", options_.experiment}});
  }
  wire_server_.reset();  // after the episodes: no CLI is left to call it
  std::lock_guard<std::mutex> control(control_mu_);
  // Saved states the run never restored: one the engine no longer holds is gone as asked.
  for (const std::string& h : saved_) {
    absl::StatusOr<uint64_t> freed = engine_.Release(h);
    if (!freed.ok() && !absl::IsNotFound(freed.status())) {
      FLOG(warn, "a saved state could not be released", {{"state", h}, {"error", std::string(freed.status().message())}});
    }
  }
  saved_.clear();
}

void RolloutRunner::SetFinishedObserver(std::function<void(const RolloutSample&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(fn);
}

void RolloutRunner::RunEpisode(uint64_t id) {
  Task task;
  worker::ScaffoldOptions so;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Live& l = live_.at(id);
    task = l.task;
    so = EpisodeOptions(l.sample.effort);
    so.header.set_dataset(l.sample.dataset);
    so.header.set_effort(l.sample.effort);
    (*so.header.mutable_metrics())["dispatch_version"] = static_cast<double>(l.sample.dispatch_version);
  }
  const worker::TerminalTask terminal = SandboxTaskOf(task);
  so.max_tokens = options_.forced_length ? options_.forced_length(id) : options_.max_new_tokens;
  so.exact_tokens = static_cast<bool>(options_.forced_length);
  so.seed = options_.seed * 0x9E3779B97F4A7C15ull + id;
  // The sample is done with its sandbox once its tests ran: the sandbox is destroyed off the
  // sample's path (Stop waits for every release).
  so.release = [this](const std::string& sandbox_id) {
    releases_->Submit([this, sandbox_id] {
      Stopwatch watch(clock_);
      if (absl::Status destroyed = sandboxes_.Destroy(sandbox_id); !destroyed.ok()) {
        FLOG(warn, "sandbox not destroyed", {{"sandbox", sandbox_id}, {"error", std::string(destroyed.message())}});
      }
      std::lock_guard<std::mutex> lock(mu_);
      stats_.sandbox_release_ms += watch.ElapsedMillis();
    });
  };
  // An agent CLI's requests are bound to the session by an API key, which must be a safe id.
  so.session_id = options_.agent_cli.has_value() ? absl::StrCat(SafeName(options_.experiment), ".s", id)
                                                 : absl::StrCat(options_.experiment, "/s", id);
  so.clock = &clock_;

  const int64_t start_us = clock_.NowMicros();
  absl::StatusOr<worker::ScaffoldResult> result = worker::RunScaffold(*chat_, sandboxes_, terminal, so);
  // A full cluster refuses a sandbox for now: wait a little and ask again, then give up.
  for (uint32_t attempt = 1; attempt < options_.create_attempts && !result.ok() &&
                             absl::IsResourceExhausted(result.status());
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kCreateBackoffMs << attempt));
    result = worker::RunScaffold(*chat_, sandboxes_, terminal, so);
  }
  v1::Trajectory traj;
  if (result.ok()) {
    traj = std::move(result->trajectory);
  } else {
    // Nothing ran (no sandbox): the record says why.
    traj = so.header;
    traj.set_id(so.session_id);
    traj.set_experiment(options_.experiment);
    traj.set_task(terminal.name);
    traj.set_scaffold(options_.scaffold);
    traj.set_status(v1::FAILED);
    traj.set_detail(std::string(result.status().message()));
    traj.set_start_unix_ms(clock_.WallMillis());
    traj.set_end_unix_ms(clock_.WallMillis());
  }
  const bool failed = traj.status() != v1::OK && traj.status() != v1::TIMED_OUT;
  if (failed) traj.set_reward(options_.failure_reward);
  absl::StatusOr<RolloutSample> sample = ExperimentStore::FromTrajectory(traj);
  if (!sample.ok()) {
    traj.set_status(v1::FAILED);
    traj.set_reward(options_.failure_reward);
    traj.set_detail(absl::StrCat("reading the trajectory: ", sample.status().message()));
    traj.clear_segments();
    sample = ExperimentStore::FromTrajectory(traj);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Live& l = live_.at(id);
  RolloutSample& s = l.sample;
  const RolloutSample header = s;
  s = std::move(*sample);
  s.id = header.id;
  s.group = header.group;
  s.dataset = header.dataset;
  s.task_id = header.task_id;
  s.effort = header.effort;
  s.dispatch_version = header.dispatch_version;
  s.wall_ms = static_cast<double>(clock_.NowMicros() - start_us) / 1000.0;
  l.trajectory = std::move(traj);
  l.done = true;
  stats_.sandboxes += l.trajectory.sandbox_id().empty() ? 0 : 1;
  stats_.sandbox_ms += s.sandbox_ms;
  if (auto m = l.trajectory.metrics().find("sandbox_create_ms"); m != l.trajectory.metrics().end()) {
    stats_.sandbox_create_ms += m->second;
  }
  stats_.episode_ms += s.wall_ms;
  if (!l.trajectory.sandbox_id().empty()) stats_.sandboxed_episode_ms += s.wall_ms;
  // Stop ends the generations in flight: their episodes end INTERRUPTED (stored as such by
  // the chat service), counted once at the stop rather than warned of one by one.
  const bool cancelled = stopping_ && l.trajectory.status() == v1::INTERRUPTED;
  stats_.cancelled_samples += cancelled ? 1 : 0;
  stats_.failed_samples += s.failed && !cancelled ? 1 : 0;
  if (s.failed && !cancelled) FLOG(warn, "sample failed", {{"sample", id}, {"detail", s.detail}});
  newly_finished_.push_back(id);
  cv_.notify_all();
}

void RolloutRunner::StartGroup(const GroupTicket& t) {
  auto src = tasks_.find(t.dataset);
  Task task = src != tasks_.end() ? src->second->Next() : Task{"missing", "none", "", "", {}};
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t i = 0; i < t.size; ++i) {
      uint64_t id = t.first_sample + i;
      Live l;
      l.task = task;
      l.sample.id = id;
      l.sample.group = t.group;
      l.sample.dataset = t.dataset;
      l.sample.task_id = task.id;
      l.sample.effort = t.efforts[i];
      l.sample.dispatch_version = t.dispatch_version;
      live_[id] = std::move(l);
      ids.push_back(id);
    }
    group_members_[t.group] = ids;
  }
  for (uint64_t id : ids) pool_->Submit([this, id] { RunEpisode(id); });
}

void RolloutRunner::Loop() {
  while (true) {
    std::vector<std::pair<uint64_t, uint32_t>> finished;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
      for (uint64_t id : newly_finished_) finished.push_back({id, live_.at(id).sample.GeneratedTokens()});
      newly_finished_.clear();
    }
    for (const auto& [id, len] : finished) {
      if (auto s = controller_.OnSampleFinished(id, len); !s.ok()) FLOG(warn, "controller", {{"error", s.ToString()}});
    }
    std::vector<uint64_t> ready = controller_.TakeReadyGroups(SIZE_MAX);
    if (!ready.empty()) FinishGroups(ready);
    for (const GroupTicket& t : controller_.Dispatch()) StartGroup(t);
    std::unique_lock<std::mutex> lock(mu_);
    auto wait = std::chrono::milliseconds(20);
    if (auto next = controller_.NextReleaseNanos(); next) {
      int64_t ms = std::max<int64_t>(1, (*next - clock_.NowNanos()) / 1'000'000);
      wait = std::min(wait, std::chrono::milliseconds(ms));
    }
    cv_.wait_for(lock, wait, [&] { return stopping_ || !newly_finished_.empty(); });
  }
}

void RolloutRunner::FinishGroups(const std::vector<uint64_t>& groups) {
  std::vector<std::vector<RolloutSample>> done;
  std::vector<std::vector<v1::Trajectory>> records;
  std::function<void(const RolloutSample&)> observer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observer = observer_;
    for (uint64_t g : groups) {
      std::vector<RolloutSample> group;
      std::vector<v1::Trajectory> traj;
      for (uint64_t id : group_members_[g]) {
        Live& l = live_.at(id);
        l.trajectory.set_group_id(GroupId(g));
        traj.push_back(std::move(l.trajectory));
        group.push_back(std::move(l.sample));
        live_.erase(id);
      }
      group_members_.erase(g);
      done.push_back(std::move(group));
      records.push_back(std::move(traj));
    }
  }
  if (observer) {
    for (const auto& g : done) {
      for (const auto& s : g) observer(s);
    }
  }
  if (store_ != nullptr) {
    for (const auto& r : records) {
      if (auto s = store_->PutGroup(r); !s.ok()) FLOG(error, "storing a group failed", {{"error", s.ToString()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& g : done) {
    for (const auto& s : g) {
      recent_rewards_.push_back(s.reward);
      if (recent_rewards_.size() > 256) recent_rewards_.pop_front();
    }
    stats_.samples_completed += g.size();
    stats_.groups_completed += 1;
    completed_.push_back(std::move(g));
  }
  cv_.notify_all();
}

std::vector<std::vector<RolloutSample>> RolloutRunner::TakeGroups(size_t groups,
                                                                 const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  while (completed_.size() < groups && !stopping_ && !(cancelled && cancelled())) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
  std::vector<std::vector<RolloutSample>> out;
  while (!completed_.empty() && out.size() < groups) {
    out.push_back(std::move(completed_.front()));
    completed_.pop_front();
  }
  return out;
}

void RolloutRunner::Requeue(std::vector<std::vector<RolloutSample>> groups) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) completed_.push_front(std::move(*it));
  cv_.notify_all();
}

absl::StatusOr<SwitchReport> RolloutRunner::SwitchWeights(const std::string& path, int64_t version) {
  std::lock_guard<std::mutex> control(control_mu_);
  SwitchReport report;
  report.version = version;
  // The file is read and prepared while every sequence keeps generating; a bad one is refused
  // here with nothing interrupted.
  Stopwatch stage(clock_);
  RETURN_IF_ERROR(engine_.StageWeights(options_.model, path, version));
  report.stage_ms = stage.ElapsedMillis();
  Stopwatch watch(clock_);
  // While offloaded nothing generates: the commit alone swaps the weights.
  const uint64_t prefill_before = gate_.Stats().resume_prefill_tokens;
  if (!offloaded_) report.interrupted = gate_.Pause(engine_);
  absl::Status swapped = engine_.CommitWeights(options_.model).status();
  if (swapped.ok()) controller_.SetPolicyVersion(version);
  // Resume either way: on a bad file the old weights stay in service.
  if (!offloaded_) gate_.Open();
  report.prefilled_on_resume = gate_.Stats().resume_prefill_tokens - prefill_before;
  report.stall_ms = watch.ElapsedMillis();
  if (!swapped.ok()) return swapped;
  return report;
}

absl::Status RolloutRunner::Offload() {
  std::lock_guard<std::mutex> control(control_mu_);
  controller_.SetSuspended(true);
  if (offloaded_) return absl::OkStatus();
  gate_.Pause(engine_);
  offloaded_ = true;
  absl::Status first;
  for (const std::string& seq : gate_.Parked()) {
    auto handle = engine_.SaveState(seq, /*to_file=*/false, /*ttl_ms=*/3'600'000);
    if (!handle.ok()) {
      if (first.ok()) first = handle.status();
      continue;  // stays interrupted in the KV cache; Reload resumes it from there
    }
    gate_.Relocate(seq, *handle);
    saved_.push_back(*handle);
    offloaded_count_.store(static_cast<uint32_t>(saved_.size()));
  }
  return first;
}

absl::Status RolloutRunner::Reload() {
  std::lock_guard<std::mutex> control(control_mu_);
  absl::Status first;
  for (const std::string& handle : saved_) {
    auto loaded = engine_.LoadState(handle);
    if (!loaded.ok()) {
      if (first.ok()) first = loaded.status();
      gate_.Fail(handle, Annotate(loaded.status(), "loading the offloaded state"));
      continue;
    }
    gate_.Relocate(handle, *loaded);
  }
  saved_.clear();
  offloaded_count_.store(0);
  offloaded_ = false;
  gate_.Open();
  controller_.SetSuspended(false);
  cv_.notify_all();
  return first;
}

RunnerStats RolloutRunner::Stats() const {
  worker::GateStats g = gate_.Stats();
  std::lock_guard<std::mutex> lock(mu_);
  RunnerStats s = stats_;
  s.generating = g.generating;
  s.min_generating_tokens = g.min_generating_tokens;
  s.max_unfinished_tokens = g.max_call_tokens;
  s.tokens_generated = g.tokens;
  s.resumes = g.resumes;
  s.resumed_prefill_tokens = g.resume_prefill_tokens;
  s.completed_groups_waiting = completed_.size();
  s.offloaded = offloaded_count_.load();
  double sum = 0;
  for (double r : recent_rewards_) sum += r;
  s.recent_reward = recent_rewards_.empty() ? 0 : sum / static_cast<double>(recent_rewards_.size());
  return s;
}

}  // namespace flotilla::trainer_bridge
