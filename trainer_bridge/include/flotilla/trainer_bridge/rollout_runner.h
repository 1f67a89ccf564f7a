// RolloutRunner: carries out the RolloutController's decisions on the embedded engine.
//
// It renders each task into a prompt (system prompt with the effort line, then the task),
// generates every sample of a group on the engine, records each token's logprob, policy
// version and routing as it arrives, verifies finished groups in the sandbox, stores them
// durably (ExperimentStore) and hands complete groups to batch assembly.
//
// Checkpoint switch (SwitchWeights): the engine first stages the new weights while generation
// continues (a bad file is refused then, with nothing interrupted); then every running sequence
// is interrupted at a token boundary (Engine::InterruptAll), the engine commits the staged
// weights (a swap between two steps), and each sequence resumes from
// its kept KV state (no re-prefill); tokens after the switch carry the new version, so a
// sample's versions and routing are the concatenation of its segments.
// Trainer preemption (Offload/Reload): dispatch is suspended, every in-flight sequence is
// interrupted and its state moved out of the KV cache (SaveState); Reload brings each back
// (LoadState) and resumes it.
//
// Thread-safety: every public method is thread-safe. One loop thread dispatches, collects and
// verifies; engine sinks only record tokens and wake it. The engine, controller, verifier (may
// be null: rewards stay 0, for the rollout benchmark), store (may be null) and clock must
// outlive the runner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/inference/engine.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_sample.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "flotilla/trainer_bridge/verifier.h"

namespace flotilla::trainer_bridge {

struct RunnerOptions {
  std::string model;                  // engine model name of the policy
  std::string experiment;
  std::string system_prompt;
  uint32_t max_new_tokens = 64;
  float temperature = 1.0f;
  uint64_t seed = 1;
  // Per-sample generation length override (benchmark workloads): when set, the sample ignores
  // stop tokens and generates exactly this many tokens.
  std::function<uint32_t(uint64_t sample)> forced_length;
};

struct SwitchReport {
  int64_t version = 0;
  uint32_t interrupted = 0;
  double stall_ms = 0;                // from the interrupt to the last resume
  double stage_ms = 0;                // reading and preparing the weights before it, not a stall
  uint64_t prefilled_on_resume = 0;   // must be 0: resumes never re-prefill
};

struct RunnerStats {
  uint64_t samples_completed = 0;
  uint64_t groups_completed = 0;
  uint64_t tokens_generated = 0;
  uint64_t verifier_failures = 0;
  uint64_t resumed_prefill_tokens = 0;  // prefill done by resumes (0 when nothing re-prefilled)
  uint32_t generating = 0;
  uint32_t offloaded = 0;
  uint32_t min_generating_tokens = 0;   // fewest completion tokens of any generating sample
  uint32_t max_unfinished_tokens = 0;   // most completion tokens of any sample not yet done
  size_t completed_groups_waiting = 0;
  double recent_reward = 0;             // mean over the last 256 completed samples
};

class RolloutRunner {
 public:
  RolloutRunner(RunnerOptions options, inference::Engine& engine, RolloutController& controller,
                std::map<std::string, std::unique_ptr<TaskSource>> tasks, Verifier* verifier,
                ExperimentStore* store, const Clock& clock);
  ~RolloutRunner();
  RolloutRunner(const RolloutRunner&) = delete;
  RolloutRunner& operator=(const RolloutRunner&) = delete;

  // Re-queues stored, unconsumed groups (after a restart) and starts the loop thread.
  absl::Status Start();
  // Stops the loop; interrupts and releases every in-flight sequence.
  void Stop();

  // Blocks until `groups` complete groups are available (or `cancelled` turns true / the
  // runner stops: then returns what there is, possibly nothing). The groups leave the runner.
  std::vector<std::vector<RolloutSample>> TakeGroups(size_t groups, const std::function<bool()>& cancelled);
  // Returns groups to the front of the queue (a batch that could not be delivered).
  void Requeue(std::vector<std::vector<RolloutSample>> groups);

  absl::StatusOr<SwitchReport> SwitchWeights(const std::string& path, int64_t version);
  absl::Status Offload();
  absl::Status Reload();

  [[nodiscard]] RunnerStats Stats() const;
  // Tokens of the prompt a task renders to (also used for warm-start data).
  std::vector<int32_t> RenderPrompt(const Task& task, uint32_t effort) const;
  // Calls `fn` for every finished sample before it is verified (tests compare routing).
  void SetFinishedObserver(std::function<void(const RolloutSample&)> fn);

 private:
  enum class Phase { kPending, kGenerating, kInterrupted, kOffloaded, kDone };
  struct Live {
    RolloutSample sample;
    Task task;
    std::string sequence_id;
    std::string handle;  // saved state while offloaded
    Phase phase = Phase::kPending;
    inference::SamplingParams sampling;
    uint32_t call_prefilled = 0;  // prefill reported by the current engine call
    bool resumed_with_tokens = false;  // the current call resumed a sequence that had output
  };

  void Loop();
  void StartGroup(const GroupTicket& t);
  // Submits a pending sample to the engine, unless paused (then it stays pending).
  absl::Status StartSample(uint64_t id);
  void StartPending();
  inference::TokenSink SinkFor(uint64_t id);
  void OnUpdate(uint64_t id, const inference::GenerateUpdate& u);
  void FinishGroups(const std::vector<uint64_t>& groups);
  // Interrupts every generating sample and waits until each sink has seen its stop.
  std::vector<uint64_t> InterruptAllLocked(std::unique_lock<std::mutex>& lock);

  RunnerOptions options_;
  inference::Engine& engine_;
  RolloutController& controller_;
  std::map<std::string, std::unique_ptr<TaskSource>> tasks_;
  Verifier* verifier_;
  ExperimentStore* store_;
  const Clock& clock_;

  std::mutex control_mu_;  // one switch / offload / reload at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Live> live_;                       // guarded by mu_
  std::map<uint64_t, std::vector<uint64_t>> group_members_;  // guarded by mu_
  std::deque<uint64_t> newly_finished_;                 // guarded by mu_
  std::deque<std::vector<RolloutSample>> completed_;    // guarded by mu_
  std::deque<double> recent_rewards_;                   // guarded by mu_
  std::function<void(const RolloutSample&)> observer_;  // guarded by mu_
  bool paused_ = false;                                 // guarded by mu_: no new starts
  int starting_ = 0;                                    // guarded by mu_: Generate calls in progress
  bool stopping_ = false;                               // guarded by mu_
  RunnerStats stats_;                                   // guarded by mu_
  std::thread loop_;
};

}  // namespace flotilla::trainer_bridge
