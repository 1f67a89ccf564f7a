// The Engine implementation: a scheduler thread that runs continuous-batching steps over every
// running sequence of each loaded model.
//
// Locking: step_mu_ is held for a whole step (and by every call that touches KV pages or
// weights), so weights swap and state moves happen only between steps; mu_ guards the maps,
// flags and the page pools' bookkeeping and is never held across a forward pass or a sink
// call. Pages are handed out only under both; a sequence that is not running gives its pages
// back under mu_ alone (Release). Order: step_mu_, then mu_.
// Interrupt takes only mu_, so a sink may call it.
//
// With overlap_delivery, the records and deliveries of a step's running rows are made by the
// delivery thread during the next step's forward; the scheduler then keeps step_mu_ across
// consecutive steps and lets go (with nothing pending) between two steps when a call waits
// for it (StepLock), so no caller ever sees a sequence whose last token is not yet recorded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend.h"
#include "prefix_cache.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/tokenizer.h"
#include "sampler.h"
#include "thread_pool.h"

namespace flotilla::inference {

// Whether `t` ends a generation under `p` (default stops: <end>, <eos>).
bool IsStopTokenFor(const SamplingParams& p, int32_t t);

struct ModelSlot {
  std::string name;
  ModelConfig config;
  std::unique_ptr<ModelBackend> backend;
  int64_t version = 0;
  std::unique_ptr<PagePool> pages;  // under mu_
  // Bumped whenever other weights go into service: the prefix cache's keys start from it, so
  // K/V computed under one set of weights is never reused under another. Under mu_.
  uint64_t weights_epoch = 0;
  // Serialises the backend's staging side (StageWeights, CommitWeights, SetWeights of a loaded
  // model). Taken before step_mu_.
  std::mutex stage_mu;
  int64_t staged_version = -1;  // under stage_mu; -1: nothing staged
  // The rows of the scheduler thread's current step, kept between steps so that their buffers
  // (a page table per sequence among them) are refilled rather than allocated. Scheduler only.
  StepInput step_input;
};

struct Sequence {
  std::string id;
  ModelSlot* model = nullptr;
  std::vector<int32_t> tokens;      // every token: prompts and generated
  int32_t cached = 0;               // tokens[0, cached) have K/V in pages
  int32_t pending_prompt = 0;       // uncached tokens that count as prefill
  std::vector<int32_t> pages;
  std::vector<TokenRecord> records; // every generated token, all calls
  bool running = false;
  bool interrupt = false;
  bool keep = false;
  SamplingParams sampling;
  uint64_t seed = 0;
  SequenceRng rng;
  TokenSink sink;
  uint32_t call_generated = 0;
  uint32_t call_prefilled = 0;
  // Prefix cache: whether the pages' K/V was all computed under weights_epoch `kv_epoch` (a
  // loaded state's origin is unknown: not cacheable), and how far its blocks are registered.
  bool prefix_looked_up = false;
  bool cacheable = true;
  uint64_t kv_epoch = 0;
  int32_t registered_blocks = 0;
  uint64_t chain_key = 0;
};

struct SavedState {
  std::string blob;        // host tier
  std::string file;        // file tier
  int64_t expires_ns = 0;  // 0: never
  uint64_t bytes = 0;
};

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineOptions& options);
  ~EngineImpl() override;

  absl::Status LoadModel(const std::string& name, const ModelConfig& config,
                         const std::string& safetensors_path, int64_t version) override;
  absl::Status LoadHfModel(const std::string& name, const std::string& dir, int64_t version) override;
  absl::Status UpdateWeights(const std::string& name, const std::string& path,
                             int64_t version) override;
  absl::Status StageWeights(const std::string& name, const std::string& path,
                            int64_t version) override;
  absl::StatusOr<int64_t> CommitWeights(const std::string& name) override;
  absl::StatusOr<std::string> Generate(const GenerateRequest& request, TokenSink sink) override;
  absl::StatusOr<GenerateResult> GenerateBlocking(const GenerateRequest& request) override;
  absl::StatusOr<uint32_t> Interrupt(const std::string& sequence_id) override;
  std::vector<std::string> InterruptAll() override;
  absl::Status Resume(const std::string& sequence_id, const SamplingParams& sampling,
                      TokenSink sink) override;
  absl::StatusOr<std::string> SaveState(const std::string& sequence_id, bool to_file,
                                        uint32_t ttl_ms) override;
  absl::StatusOr<std::string> LoadState(const std::string& handle) override;
  absl::StatusOr<uint64_t> Release(const std::string& sequence_id) override;
  absl::StatusOr<ScoreResult> Score(const std::string& model, const std::vector<int32_t>& tokens,
                                    uint32_t start, uint32_t top_k, bool full_vocab) override;
  absl::StatusOr<int64_t> PolicyVersion(const std::string& model) const override;
  absl::StatusOr<ModelConfig> Config(const std::string& model) const override;
  EngineStats Stats() const override;
  std::vector<std::string> ModelNames() const override;

  // Installs already-built weights (the benchmark's random models).
  absl::Status InstallModel(const std::string& name, std::shared_ptr<const ModelWeights> weights);
  // While held, no step starts (benchmarks: a whole batch submitted before its first step,
  // so every sequence runs in lockstep).
  void HoldSteps(bool hold);
  // A new model with deterministic random weights made by the backend itself (benchmarks).
  absl::Status InstallRandomModel(const std::string& name, const ModelConfig& config,
                                  uint64_t seed, float stddev, int64_t version);

 private:
  // One sink call. A finished sequence's sink moves into `sink`; a running sequence's stays in
  // its Sequence and `running_sink` points at it, which is safe because the scheduler delivers
  // under step_mu_ and a running sequence's sink changes only in a step (FinishLocked).
  struct Delivery {
    TokenSink sink;
    const TokenSink* running_sink = nullptr;
    GenerateUpdate update;
    void Send() { (running_sink != nullptr ? *running_sink : sink)(std::move(update)); }
  };

  // A token of a sequence that goes on, recorded and delivered during the next forward.
  struct PendingRow {
    Sequence* seq;
    TokenRecord rec;
    uint32_t prefilled;
    uint64_t rng_before;  // the sequence's RNG state before this token's draw
    // The step's routing: rec.experts is filled from [first, first + count) when applied.
    std::shared_ptr<const std::vector<int32_t>> experts;
    int32_t experts_first, experts_count;
  };
  // Holds step_mu_ for an API call; the scheduler, which keeps step_mu_ across consecutive steps
  // while it has pending rows, lets go between two steps when a caller waits.
  class StepLock {
   public:
    explicit StepLock(EngineImpl* e) : e_(e) {
      e_->step_waiters_.fetch_add(1);
      e_->step_mu_.lock();
      e_->step_waiters_.fetch_sub(1);
    }
    ~StepLock() { e_->step_mu_.unlock(); }
    StepLock(const StepLock&) = delete;
    StepLock& operator=(const StepLock&) = delete;

   private:
    EngineImpl* e_;
  };

  void SchedulerLoop();
  // Appends each pending row's record to its sequence and its delivery to `out`. mu_ held.
  // borrow_sinks: the deliveries point at the sequences' sinks, which is safe only when they
  // are sent before any sequence can finish (a finish moves its sink away); else they copy.
  void ApplyPendingLocked(std::vector<PendingRow>* rows, std::vector<Delivery>* out, bool borrow_sinks);
  // An interrupted sequence stops after the last token its sink was given: a token of its
  // still pending (made but not delivered) is taken back, as if its step had not run for it,
  // and made again on resume. mu_ held.
  void TakeBackPendingLocked(Sequence* seq);
  // Applies and sends `rows` (scheduler or delivery thread; mu_ not held).
  void DeliverPending(std::vector<PendingRow>* rows);
  void DeliveryLoop();
  // Hands pending_ to the delivery thread / waits until it has sent them.
  void StartDelivery();
  double FinishDelivery();  // the delivery thread's time for the rows it took (ms)
  // One step over every model with running sequences; false when there was nothing to run.
  bool RunStep();
  // rows: set to the number of rows the step ran (0: none).
  bool RunModelStep(ModelSlot* slot, std::vector<Delivery>* out, size_t* rows);
  absl::StatusOr<std::unique_ptr<ModelBackend>> NewBackend(const ModelConfig& config);
  // The loaded model `name` (empty: the default) and its config.
  absl::StatusOr<std::pair<ModelSlot*, ModelConfig>> LoadedModel(const std::string& name) const;
  // Both need slot->stage_mu held.
  absl::Status StageLocked(ModelSlot* slot, std::shared_ptr<const ModelWeights> weights);
  // Reads, checks and stages `path` the way the slot's backend takes it: straight from the file
  // where it can, else through ModelWeights::Load (read before stage_mu is taken).
  absl::Status ReadAndStage(ModelSlot* slot, const ModelConfig& config, const std::string& path,
                            int64_t version, std::unique_lock<std::mutex>* stage);
  absl::StatusOr<int64_t> CommitLocked(ModelSlot* slot);
  ModelSlot* FindModelLocked(const std::string& name) const;
  absl::Status EnsurePagesLocked(Sequence* seq, int32_t tokens);
  // A new sequence's first planning: takes the cached K/V of its prompt's longest cached
  // prefix (shared blocks, and a copy of the block where it diverges). Step lock and mu_ held.
  absl::Status UsePrefixCacheLocked(Sequence* seq);
  // Registers the blocks of `seq` whose K/V is final (all of them when it is freed).
  void RegisterBlocksLocked(Sequence* seq, bool freeing);
  void ReleasePagesLocked(ModelSlot* slot, std::vector<int32_t>* pages);
  // Sets up a new slot's page pool from its backend.
  static void InitPages(ModelSlot* slot);
  void FreeSequenceLocked(Sequence* seq);
  void FinishLocked(Sequence* seq, FinishReason reason, const std::string& error,
                    std::vector<Delivery>* out);
  void PurgeExpiredLocked();
  int64_t NowNanos() const { return clock_->NowNanos(); }

  const EngineOptions options_;
  const Clock* clock_;
  std::string state_dir_;
  bool own_state_dir_ = false;   // made here (a temporary directory): removed with the engine
  bool state_dir_made_ = false;  // the directory exists (made at the first file save)
  // The file tier's directory, made on first use. Called with mu_ held.
  absl::StatusOr<std::string> StateDirLocked();
  ThreadPool pool_;

  std::mutex step_mu_;
  std::atomic<int> step_waiters_{0};
  // Rows of the last step not yet recorded (overlap_delivery); scheduler thread only, empty
  // whenever the scheduler does not hold step_mu_.
  std::vector<PendingRow> pending_;
  bool overlap_ = false;
  std::mutex delivery_mu_;
  std::condition_variable delivery_cv_;
  std::vector<PendingRow> delivery_rows_;  // under delivery_mu_
  bool delivery_busy_ = false, delivery_stop_ = false;
  double delivery_ms_ = 0;  // under delivery_mu_: the delivery thread's last batch (profile only)
  std::string delivery_thread_;  // its CPU time and run-queue wait, when it ended (profile only)
  std::thread delivery_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool hold_ = false;  // HoldSteps
  std::map<std::string, std::unique_ptr<ModelSlot>> models_;
  std::string default_model_;
  std::map<std::string, std::unique_ptr<Sequence>> seqs_;
  std::map<std::string, SavedState> saved_;
  EngineStats stats_;
  // Figures recorded as they happen (null without EngineOptions::metrics); the rest are read
  // from Stats() at scrape time by the collector.
  struct Metrics {
    Histogram* step_seconds = nullptr;
    Histogram* weight_swap_stall_seconds = nullptr;
    MetricsRegistry::CollectorHandle collector;
  } metrics_;
  void RegisterMetrics(MetricsRegistry& registry);
  // FLOTILLA_ENGINE_PROFILE: wall time of each part of a step (host planning, the backend's
  // forward, sampling, bookkeeping, delivery), summed and printed when the engine is destroyed.
  // Touched only by the scheduler thread.
  struct StepTimes {
    uint64_t steps = 0;
    double plan_ms = 0, forward_ms = 0, sample_ms = 0, record_ms = 0, deliver_ms = 0, between_ms = 0;
    double overlap_ms = 0;  // the delivery thread's records and deliveries beside the forward
    double max_forward_ms = 0;  // the slowest forward (first-call costs show here)
  };
  struct StepProfile {
    bool enabled = false;
    std::map<size_t, StepTimes> by_rows;  // keyed by the step's row count
    int64_t last_end_ns = 0;              // when the previous step's delivery ended
    std::string scheduler_thread;         // its CPU time and run-queue wait, when it ended
  } profile_;
  std::thread scheduler_;
};

}  // namespace flotilla::inference
