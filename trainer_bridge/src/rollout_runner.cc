#include "flotilla/trainer_bridge/rollout_runner.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/trainer_bridge/advantages.h"

namespace flotilla::trainer_bridge {
namespace {
constexpr auto kStopWait = std::chrono::seconds(30);
}  // namespace

RolloutRunner::RolloutRunner(RunnerOptions options, inference::Engine& engine, RolloutController& controller,
                             std::map<std::string, std::unique_ptr<TaskSource>> tasks, Verifier* verifier,
                             ExperimentStore* store, const Clock& clock)
    : options_(std::move(options)), engine_(engine), controller_(controller), tasks_(std::move(tasks)),
      verifier_(verifier), store_(store), clock_(clock) {}

RolloutRunner::~RolloutRunner() { Stop(); }

std::vector<int32_t> RolloutRunner::RenderPrompt(const Task& task, uint32_t effort) const {
  std::vector<inference::ChatMessage> msgs;
  std::string system = options_.system_prompt;
  if (effort > 0) system = system.empty() ? EffortPromptLine(effort) : absl::StrCat(system, "\n", EffortPromptLine(effort));
  if (!system.empty()) msgs.push_back({inference::ChatMessage::Role::kSystem, system, {}, {}});
  msgs.push_back({inference::ChatMessage::Role::kUser, task.prompt, {}, {}});
  return inference::RenderConversation(msgs, /*add_generation_prompt=*/true);
}

absl::Status RolloutRunner::Start() {
  if (store_ != nullptr) {
    ASSIGN_OR_RETURN(auto groups, store_->LoadUnconsumed());
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& g : groups) completed_.push_back(std::move(g));
    if (!completed_.empty()) FLOG(info, "requeued stored groups", {{"groups", completed_.size()}});
  }
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void RolloutRunner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    paused_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  std::vector<std::string> seqs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, l] : live_) {
      if (!l.sequence_id.empty() && l.phase != Phase::kDone) seqs.push_back(l.sequence_id);
      if (!l.handle.empty()) seqs.push_back(l.handle);
    }
  }
  for (const auto& s : seqs) (void)engine_.Interrupt(s);
  for (const auto& s : seqs) (void)engine_.Release(s);
}

void RolloutRunner::SetFinishedObserver(std::function<void(const RolloutSample&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(fn);
}

inference::TokenSink RolloutRunner::SinkFor(uint64_t id) {
  return [this, id](const inference::GenerateUpdate& u) { OnUpdate(id, u); };
}

void RolloutRunner::OnUpdate(uint64_t id, const inference::GenerateUpdate& u) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& l = it->second;
  if (l.sequence_id.empty()) l.sequence_id = u.sequence_id;
  if (auto s = l.sample.Append(u.tokens); !s.ok()) {
    l.sample.failed = true;
    l.sample.detail = std::string(s.message());
  }
  stats_.tokens_generated += u.tokens.size();
  // prefilled_tokens is cumulative within one Generate/Resume call. A resume that prefills a
  // sequence which had already produced tokens would be a re-prefill; a sequence interrupted
  // while still queued (nothing generated) legitimately prefills its prompt for the first time.
  if (l.sample.segments > 1 && l.resumed_with_tokens && u.prefilled_tokens > l.call_prefilled) {
    stats_.resumed_prefill_tokens += u.prefilled_tokens - l.call_prefilled;
  }
  l.call_prefilled = u.prefilled_tokens;
  switch (u.finish) {
    case inference::FinishReason::kRunning:
      return;
    case inference::FinishReason::kInterrupted:
      l.phase = Phase::kInterrupted;
      break;
    case inference::FinishReason::kError:
    case inference::FinishReason::kCancelled:
      l.sample.failed = true;
      l.sample.detail = u.error.empty() ? "generation cancelled" : u.error;
      [[fallthrough]];
    case inference::FinishReason::kStop:
    case inference::FinishReason::kLength:
      l.phase = Phase::kDone;
      newly_finished_.push_back(id);
      break;
  }
  cv_.notify_all();
}

absl::Status RolloutRunner::StartSample(uint64_t id) {
  inference::GenerateRequest req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Live& l = live_.at(id);
    if (paused_ || l.phase != Phase::kPending) return absl::OkStatus();
    req.model = options_.model;
    req.prompt = l.sample.prompt;
    req.sampling = l.sampling;
    req.keep_state = false;
    l.sample.segments = 1;
    l.phase = Phase::kGenerating;
    ++starting_;
  }
  auto seq = engine_.Generate(req, SinkFor(id));
  std::lock_guard<std::mutex> lock(mu_);
  --starting_;
  cv_.notify_all();
  Live& l = live_.at(id);
  if (!seq.ok()) {
    l.sample.failed = true;
    l.sample.detail = std::string(seq.status().message());
    l.phase = Phase::kDone;
    newly_finished_.push_back(id);
    return seq.status();
  }
  if (l.sequence_id.empty()) l.sequence_id = *seq;
  return absl::OkStatus();
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
      l.sample.prompt = RenderPrompt(task, t.efforts[i]);
      l.sampling.temperature = options_.temperature;
      l.sampling.seed = options_.seed * 0x9E3779B97F4A7C15ull + id;
      l.sampling.max_new_tokens = options_.max_new_tokens;
      if (options_.forced_length) {
        l.sampling.max_new_tokens = options_.forced_length(id);
        l.sampling.stop_tokens = {-1};  // no token id matches: run to exactly this length
      }
      live_[id] = std::move(l);
      ids.push_back(id);
    }
    group_members_[t.group] = ids;
  }
  for (uint64_t id : ids) {
    if (auto s = StartSample(id); !s.ok()) FLOG(warn, "sample failed to start", {{"sample", id}, {"error", s.ToString()}});
  }
}

void RolloutRunner::StartPending() {
  std::vector<uint64_t> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, l] : live_) {
      if (l.phase == Phase::kPending) pending.push_back(id);
    }
  }
  for (uint64_t id : pending) (void)StartSample(id);
}

void RolloutRunner::Loop() {
  while (true) {
    std::vector<uint64_t> finished;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
      finished.assign(newly_finished_.begin(), newly_finished_.end());
      newly_finished_.clear();
    }
    for (uint64_t id : finished) {
      uint32_t len = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        len = static_cast<uint32_t>(live_.at(id).sample.completion.size());
      }
      if (auto s = controller_.OnSampleFinished(id, len); !s.ok()) FLOG(warn, "controller", {{"error", s.ToString()}});
    }
    std::vector<uint64_t> ready = controller_.TakeReadyGroups(SIZE_MAX);
    if (!ready.empty()) FinishGroups(ready);
    bool paused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      paused = paused_;
    }
    if (!paused) {
      for (const GroupTicket& t : controller_.Dispatch()) StartGroup(t);
    }
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
  std::vector<VerifyItem> items;
  std::function<void(const RolloutSample&)> observer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observer = observer_;
    for (uint64_t g : groups) {
      std::vector<RolloutSample> group;
      for (uint64_t id : group_members_[g]) {
        Live& l = live_.at(id);
        items.push_back({l.task.family, l.task.prompt, l.task.answer,
                         inference::Decode(l.sample.completion, /*skip_special=*/true)});
        group.push_back(std::move(l.sample));
        live_.erase(id);
      }
      group_members_.erase(g);
      done.push_back(std::move(group));
    }
  }
  if (observer) {
    for (const auto& g : done) {
      for (const auto& s : g) observer(s);
    }
  }
  if (verifier_ != nullptr) {
    auto rewards = verifier_->Verify(items);
    size_t k = 0;
    for (auto& g : done) {
      for (auto& s : g) {
        if (!rewards.ok()) {
          s.failed = true;
          s.detail = absl::StrCat("verifier: ", rewards.status().message());
        } else if (!s.failed) {
          s.reward = (*rewards)[k];
        }
        ++k;
      }
    }
    if (!rewards.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.verifier_failures += 1;
      FLOG(warn, "verifier failed", {{"error", rewards.status().ToString()}});
    }
  }
  if (store_ != nullptr) {
    for (const auto& g : done) {
      if (auto s = store_->PutGroup(g); !s.ok()) FLOG(error, "storing a group failed", {{"error", s.ToString()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& g : done) {
    for (const auto& s : g) {
      recent_rewards_.push_back(s.failed ? 0.0 : s.reward);
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

std::vector<uint64_t> RolloutRunner::InterruptAllLocked(std::unique_lock<std::mutex>& lock) {
  paused_ = true;
  // A Generate call in progress must land before the engine is told to interrupt.
  cv_.wait(lock, [&] { return starting_ == 0; });
  lock.unlock();
  std::vector<std::string> ids = engine_.InterruptAll();
  std::set<std::string> interrupted(ids.begin(), ids.end());
  lock.lock();
  // Sequences the engine had not yet scheduled are interrupted one by one.
  std::vector<std::string> extra;
  for (auto& [id, l] : live_) {
    if (l.phase == Phase::kGenerating && !l.sequence_id.empty() && !interrupted.contains(l.sequence_id)) {
      extra.push_back(l.sequence_id);
    }
  }
  lock.unlock();
  for (const auto& s : extra) (void)engine_.Interrupt(s);
  lock.lock();
  cv_.wait_for(lock, kStopWait, [&] {
    for (auto& [id, l] : live_) {
      if (l.phase == Phase::kGenerating) return false;
    }
    return true;
  });
  std::vector<uint64_t> out;
  for (auto& [id, l] : live_) {
    if (l.phase == Phase::kInterrupted) out.push_back(id);
  }
  return out;
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
  std::unique_lock<std::mutex> lock(mu_);
  bool was_paused = paused_;
  std::vector<uint64_t> ids = InterruptAllLocked(lock);
  uint64_t prefill_before = stats_.resumed_prefill_tokens;
  lock.unlock();
  absl::Status swapped = engine_.CommitWeights(options_.model).status();
  if (swapped.ok()) controller_.SetPolicyVersion(version);
  // Resume either way: on a bad file the old weights stay in service.
  for (uint64_t id : ids) {
    inference::SamplingParams sampling;
    std::string seq;
    {
      std::lock_guard<std::mutex> g(mu_);
      Live& l = live_.at(id);
      if (l.phase != Phase::kInterrupted) continue;
      sampling = l.sampling;
      uint32_t done = static_cast<uint32_t>(l.sample.completion.size());
      sampling.max_new_tokens = l.sampling.max_new_tokens > done ? l.sampling.max_new_tokens - done : 1;
      l.phase = Phase::kGenerating;
      l.sample.segments += 1;
      l.call_prefilled = 0;
      l.resumed_with_tokens = !l.sample.completion.empty();
      seq = l.sequence_id;
    }
    if (auto s = engine_.Resume(seq, sampling, SinkFor(id)); !s.ok()) {
      std::lock_guard<std::mutex> g(mu_);
      Live& l = live_.at(id);
      l.sample.failed = true;
      l.sample.detail = absl::StrCat("resume: ", s.message());
      l.phase = Phase::kDone;
      newly_finished_.push_back(id);
    }
    report.interrupted += 1;
  }
  lock.lock();
  paused_ = was_paused;
  report.prefilled_on_resume = stats_.resumed_prefill_tokens - prefill_before;
  lock.unlock();
  StartPending();
  cv_.notify_all();
  report.stall_ms = watch.ElapsedMillis();
  if (!swapped.ok()) return swapped;
  return report;
}

absl::Status RolloutRunner::Offload() {
  std::lock_guard<std::mutex> control(control_mu_);
  controller_.SetSuspended(true);
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<uint64_t> ids = InterruptAllLocked(lock);
  lock.unlock();
  absl::Status first;
  for (uint64_t id : ids) {
    std::string seq;
    {
      std::lock_guard<std::mutex> g(mu_);
      seq = live_.at(id).sequence_id;
    }
    auto handle = engine_.SaveState(seq, /*to_file=*/false, /*ttl_ms=*/3'600'000);
    std::lock_guard<std::mutex> g(mu_);
    Live& l = live_.at(id);
    if (!handle.ok()) {
      if (first.ok()) first = handle.status();
      continue;  // stays interrupted in the KV cache; Reload resumes it from there
    }
    l.handle = *handle;
    l.phase = Phase::kOffloaded;
    stats_.offloaded += 1;
  }
  return first;
}

absl::Status RolloutRunner::Reload() {
  std::lock_guard<std::mutex> control(control_mu_);
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [id, l] : live_) {
      if (l.phase == Phase::kOffloaded || l.phase == Phase::kInterrupted) ids.push_back(id);
    }
  }
  absl::Status first;
  for (uint64_t id : ids) {
    std::string handle, seq;
    inference::SamplingParams sampling;
    {
      std::lock_guard<std::mutex> g(mu_);
      Live& l = live_.at(id);
      handle = l.handle;
      seq = l.sequence_id;
      sampling = l.sampling;
      uint32_t done = static_cast<uint32_t>(l.sample.completion.size());
      sampling.max_new_tokens = l.sampling.max_new_tokens > done ? l.sampling.max_new_tokens - done : 1;
    }
    if (!handle.empty()) {
      auto loaded = engine_.LoadState(handle);
      if (!loaded.ok()) {
        if (first.ok()) first = loaded.status();
        std::lock_guard<std::mutex> g(mu_);
        Live& l = live_.at(id);
        l.sample.failed = true;
        l.sample.detail = absl::StrCat("load state: ", loaded.status().message());
        l.phase = Phase::kDone;
        newly_finished_.push_back(id);
        continue;
      }
      seq = *loaded;
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      Live& l = live_.at(id);
      l.sequence_id = seq;
      l.handle.clear();
      l.phase = Phase::kGenerating;
      l.sample.segments += 1;
      l.call_prefilled = 0;
      l.resumed_with_tokens = !l.sample.completion.empty();
      if (stats_.offloaded > 0 && !handle.empty()) stats_.offloaded -= 1;
    }
    if (auto s = engine_.Resume(seq, sampling, SinkFor(id)); !s.ok()) {
      if (first.ok()) first = s;
      std::lock_guard<std::mutex> g(mu_);
      Live& l = live_.at(id);
      l.sample.failed = true;
      l.sample.detail = absl::StrCat("resume: ", s.message());
      l.phase = Phase::kDone;
      newly_finished_.push_back(id);
    }
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    paused_ = false;
  }
  StartPending();
  controller_.SetSuspended(false);
  cv_.notify_all();
  return first;
}

RunnerStats RolloutRunner::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RunnerStats s = stats_;
  s.generating = 0;
  for (const auto& [id, l] : live_) {
    auto n = static_cast<uint32_t>(l.sample.completion.size());
    if (l.phase != Phase::kDone) s.max_unfinished_tokens = std::max(s.max_unfinished_tokens, n);
    if (l.phase != Phase::kGenerating) continue;
    s.min_generating_tokens = s.generating == 0 ? n : std::min(s.min_generating_tokens, n);
    ++s.generating;
  }
  s.completed_groups_waiting = completed_.size();
  double sum = 0;
  for (double r : recent_rewards_) sum += r;
  s.recent_reward = recent_rewards_.empty() ? 0 : sum / static_cast<double>(recent_rewards_.size());
  return s;
}

}  // namespace flotilla::trainer_bridge
