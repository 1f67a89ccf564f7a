// RolloutRunner: carries out the RolloutController's decisions as worker episodes.
//
// Every sample is one episode on a bounded pool (one thread per sample the controller may
// have in flight): a sandbox from the sandbox client (the scheduler's front door in the
// embedded default and distributed alike), the experiment's scaffold (single-turn, mini,
// terminal; worker::RunScaffold) talking to the model only through the worker's ChatService
// and engine token generator, the task's tests run in the sample's own sandbox, the sandbox
// destroyed. An agent CLI scaffold (pi) runs the CLI inside the sample's sandbox; its requests
// reach the same ChatService only through the worker's wire APIs (worker::WireApi, served by
// the runner on 127.0.0.1 and forwarded by each sandbox's in-sandbox endpoint), bound to the
// sample's session, so its trajectory is the same token bookkeeping as a built-in scaffold's. The episode's trajectory is the worker session's (one token bookkeeping, saved
// by the session after every turn); the sample the batch assembler gets is read from it
// (ExperimentStore::FromTrajectory), and complete groups are written again whole with their
// group id and reward (ExperimentStore::PutGroup) and handed to batch assembly.
//
// A sandbox that cannot be created (after `create_attempts` tries of a full cluster), dies,
// breaks, or kills the tests, and an engine or worker error, end the sample as a failed
// trajectory with its reason and reward `failure_reward`: stored, counted, trained on, never
// dropped.
//
// Checkpoint switch (SwitchWeights): the engine first stages the new weights while generation
// continues (a bad file is refused then, with nothing interrupted); then the runner's
// GenerationGate interrupts every running generation at a token boundary and parks it, the
// engine commits the staged weights, and each parked generation resumes from its kept KV state
// (no re-prefill) inside the same model turn; tokens after the switch carry the new version,
// so a sample's versions and routing are the concatenation of its segments.
// Trainer preemption (Offload/Reload): dispatch is suspended, every running generation parks
// and its state moves out of the KV cache (SaveState); Reload brings each back (LoadState) and
// it resumes. Sequences of multi-turn samples that sit between two turns (the agent is in its
// sandbox) stay in the KV cache; their next turn waits at the gate until Reload.
//
// Thread-safety: every public method is thread-safe. One loop thread dispatches and collects;
// episodes run on the pool. The engine, controller, sandbox client, store (may be null: the
// trajectories stay in memory) and clock must outlive the runner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/http_server.h"
#include "flotilla/common/metrics.h"
#include "flotilla/inference/engine.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_sample.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/generation_gate.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/scaffold_transcript.h"
#include "flotilla/worker/token_generator.h"
#include "flotilla/worker/wire_api.h"

namespace flotilla::trainer_bridge {

class EpisodePool;

struct RunnerOptions {
  std::string model;                  // engine model name of the policy
  std::string experiment;
  std::string system_prompt;
  std::string system_template;        // mini, terminal: replace the scaffold's own texts
  std::string instance_template;
  std::string scaffold = "single-turn";
  std::string sandbox_policy = "default";
  uint32_t max_new_tokens = 64;       // per model turn
  uint32_t max_turns = 20;            // mini, terminal
  float temperature = 1.0f;
  uint64_t seed = 1;
  double failure_reward = 0;
  uint32_t episodes = 64;             // pool threads: the controller's max_in_flight
  uint32_t create_attempts = 5;       // tries of a sandbox create the cluster refuses as full
  int32_t routing_width = 0;          // the policy's layers x top_k
  // The episodes' worker sessions, turns, tokens and tool calls are counted here (borrowed;
  // must outlive the runner); null: not counted.
  MetricsRegistry* metrics = nullptr;
  // Per-sample generation length override (benchmark workloads): when set, every model turn of
  // the sample ignores stop tokens and generates exactly this many tokens.
  std::function<uint32_t(uint64_t sample)> forced_length;
  // The scaffold is this agent CLI (its name is `scaffold`): it runs in each sample's sandbox,
  // installed in the task's image (spec.preinstalled) or copied in.
  std::optional<worker::ExternalAgentSpec> agent_cli;
};

struct SwitchReport {
  int64_t version = 0;
  uint32_t interrupted = 0;
  double stall_ms = 0;                // from the interrupt to the resume
  double stage_ms = 0;                // reading and preparing the weights before it, not a stall
  uint64_t prefilled_on_resume = 0;   // must be 0: resumes never re-prefill
};

struct RunnerStats {
  uint64_t samples_completed = 0;
  uint64_t groups_completed = 0;
  uint64_t failed_samples = 0;
  uint64_t cancelled_samples = 0;       // in flight when Stop came: interrupted, not failed
  uint64_t tokens_generated = 0;
  uint64_t resumes = 0;                 // generations resumed after a switch or reload
  uint64_t resumed_prefill_tokens = 0;  // prefill done by resumes (0 when nothing re-prefilled)
  uint64_t sandboxes = 0;               // sandboxes created for samples
  double sandbox_ms = 0;                // their create + destroy time, summed
  double sandbox_create_ms = 0;         // ... the creates' share
  // Destroying them after their episodes ended (off the samples' path), summed.
  double sandbox_release_ms = 0;
  double episode_ms = 0;                // the episodes' wall time, summed
  double sandboxed_episode_ms = 0;      // ... of the episodes that had a sandbox
  uint32_t generating = 0;
  uint32_t offloaded = 0;
  uint32_t min_generating_tokens = 0;   // fewest tokens of any generation in progress
  uint32_t max_unfinished_tokens = 0;   // most tokens of any generation in progress
  size_t completed_groups_waiting = 0;
  double recent_reward = 0;             // mean over the last 256 completed samples
};

class RolloutRunner {
 public:
  RolloutRunner(RunnerOptions options, inference::Engine& engine, RolloutController& controller,
                std::map<std::string, std::unique_ptr<TaskSource>> tasks, worker::SandboxClient& sandboxes,
                ExperimentStore* store, const Clock& clock);
  ~RolloutRunner();
  RolloutRunner(const RolloutRunner&) = delete;
  RolloutRunner& operator=(const RolloutRunner&) = delete;

  // Re-queues stored, unconsumed groups (after a restart), starts the wire API server of an
  // agent CLI scaffold, and starts the loop thread.
  absl::Status Start();
  // Stops the loop; running generations end (their samples INTERRUPTED, counted in
  // RunnerStats::cancelled_samples and stored by the chat service) and every episode returns.
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
  // Tokens of the prompt a prompt-only task renders to under the single-turn scaffold (the
  // same ids its session records; used for warm-start data).
  std::vector<int32_t> RenderPrompt(const Task& task, uint32_t effort) const;
  // Supervised warm-start examples of one task, in the tokens its episode records: under the
  // single-turn scaffold (or for a task without reference steps) the prompt and the reference
  // answer; under mini or terminal one example per assistant turn of the reference episode
  // (worker::ReferenceTurnExamples), so a warm start teaches the tool call, reading its output
  // and the final answer.
  absl::StatusOr<std::vector<worker::TurnExample>> WarmStartExamples(const Task& task, uint32_t effort) const;
  // Calls `fn` for every finished sample before its group is stored (tests compare routing).
  void SetFinishedObserver(std::function<void(const RolloutSample&)> fn);

 private:
  struct Live {
    Task task;
    RolloutSample sample;
    v1::Trajectory trajectory;
    bool done = false;
  };

  void Loop();
  void StartGroup(const GroupTicket& t);
  // Runs sample `id`'s episode on a pool thread and records its outcome.
  void RunEpisode(uint64_t id);
  void FinishGroups(const std::vector<uint64_t>& groups);
  // The system text of a sample: the experiment's system prompt and the effort line.
  std::string SystemText(uint32_t effort) const;
  // The scaffold options every episode of this experiment shares (the per-sample header, seed,
  // session id and length are the caller's).
  worker::ScaffoldOptions EpisodeOptions(uint32_t effort) const;

  RunnerOptions options_;
  inference::Engine& engine_;
  RolloutController& controller_;
  std::map<std::string, std::unique_ptr<TaskSource>> tasks_;
  worker::SandboxClient& sandboxes_;
  ExperimentStore* store_;
  const Clock& clock_;
  worker::GenerationGate gate_;
  std::unique_ptr<worker::TokenGenerator> generator_;
  std::unique_ptr<worker::ChatService> chat_;
  // An agent CLI scaffold's door to chat_: the wire APIs on 127.0.0.1 (Start).
  std::unique_ptr<worker::WireApi> wire_;
  std::unique_ptr<HttpServer> wire_server_;
  int wire_port_ = 0;

  std::mutex control_mu_;  // one switch / offload / reload at a time
  bool offloaded_ = false;                              // guarded by control_mu_
  std::vector<std::string> saved_;                      // state handles while offloaded; control_mu_
  std::atomic<uint32_t> offloaded_count_{0};            // saved_.size(), for Stats
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Live> live_;                       // guarded by mu_
  std::map<uint64_t, std::vector<uint64_t>> group_members_;  // guarded by mu_
  std::deque<uint64_t> newly_finished_;                 // guarded by mu_
  std::deque<std::vector<RolloutSample>> completed_;    // guarded by mu_
  std::deque<double> recent_rewards_;                   // guarded by mu_
  RunnerStats stats_;                                   // guarded by mu_
  std::function<void(const RolloutSample&)> observer_;  // guarded by mu_
  bool stopping_ = false;                               // guarded by mu_
  std::thread loop_;
  // Destroys the samples' sandboxes off their episodes' path (ScaffoldOptions::release);
  // joined after pool_.
  std::unique_ptr<EpisodePool> releases_;
  std::unique_ptr<EpisodePool> pool_;                   // last: joined before the rest goes
};

}  // namespace flotilla::trainer_bridge
