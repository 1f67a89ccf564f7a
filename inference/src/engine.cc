#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "engine_impl.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/hf_config.h"
#include "flotilla/inference/safetensors.h"
#include "hf_checkpoint.h"
#include "hf_weights.h"

extern "C" void openblas_set_num_threads(int);

namespace flotilla::inference {
namespace {

int ThreadCount(int asked) {
  if (asked > 0) return asked;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// The calling thread's CPU time and its time runnable but waiting for a core
// (/proc/thread-self/schedstat), for the step profile; empty where the kernel has no schedstat.
std::string ThreadCpuAndWait() {
  std::ifstream f("/proc/thread-self/schedstat");
  unsigned long long run_ns = 0, wait_ns = 0;
  if (!(f >> run_ns >> wait_ns)) return "";
  return absl::StrFormat("cpu_s=%.2f runqueue_wait_s=%.2f", run_ns * 1e-9, wait_ns * 1e-9);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("engine: unknown backend '", options.backend, "' (cpu or cuda)"));
  }
  if (options.kv_page_tokens == 0) return absl::InvalidArgumentError("engine: kv_page_tokens must be > 0");
  if (options.max_batch == 0) return absl::InvalidArgumentError("engine: max_batch must be > 0");
  if (options.max_step_tokens == 0) return absl::InvalidArgumentError("engine: max_step_tokens must be > 0");
  return std::unique_ptr<Engine>(new EngineImpl(options));
}

EngineImpl::EngineImpl(const EngineOptions& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock::Get()),
      pool_(ThreadCount(options.threads)) {
  openblas_set_num_threads(ThreadCount(options.threads));
  // The file tier's directory is made at the first SaveState to a file (StateDirLocked): most
  // engines never use it, and a process killed before its destructor leaves nothing behind.
  state_dir_ = options.state_dir;
  profile_.enabled = std::getenv("FLOTILLA_ENGINE_PROFILE") != nullptr;
  overlap_ = options.overlap_delivery > 0 || (options.overlap_delivery < 0 && options.backend == "cuda");
  if (options.metrics != nullptr) RegisterMetrics(*options.metrics);
  if (overlap_) delivery_ = std::thread([this] { DeliveryLoop(); });
  scheduler_ = std::thread([this] { SchedulerLoop(); });
}

void EngineImpl::RegisterMetrics(MetricsRegistry& registry) {
  metrics_.step_seconds = &registry.GetHistogram("flotilla_engine_step_seconds", "Wall time of one engine step",
                                                 MetricsRegistry::ExponentialBounds(0.0005, 2, 14));
  metrics_.weight_swap_stall_seconds =
      &registry.GetHistogram("flotilla_engine_weight_swap_stall_seconds",
                             "Time steps were stopped to put staged weights in service",
                             MetricsRegistry::ExponentialBounds(0.0001, 4, 9));
  metrics_.collector = registry.AddCollector([this](MetricsSnapshotWriter& w) {
    EngineStats s = Stats();
    w.Counter("flotilla_engine_prefill_tokens_total", "Tokens run through prefill", {}, static_cast<double>(s.prefill_tokens));
    w.Counter("flotilla_engine_decode_tokens_total", "Tokens run through decode (each generated token but the first of a call)", {},
              static_cast<double>(s.decode_tokens));
    w.Counter("flotilla_engine_steps_total", "Engine steps", {}, static_cast<double>(s.steps));
    w.Counter("flotilla_engine_interrupts_total", "Sequences interrupted at a token boundary", {},
              static_cast<double>(s.interrupts));
    w.Gauge("flotilla_engine_batch_size", "Sequences generating now", {}, s.active_sequences);
    w.Gauge("flotilla_engine_kv_pages", "KV cache pages", {{"state", "used"}}, s.kv_pages_used);
    w.Gauge("flotilla_engine_kv_pages", "KV cache pages", {{"state", "free"}},
            s.kv_pages_total - s.kv_pages_used - s.kv_pages_cached);
    w.Gauge("flotilla_engine_kv_pages", "KV cache pages", {{"state", "cached"}}, s.kv_pages_cached);
    w.Counter("flotilla_engine_prefix_cached_tokens_total", "Prompt tokens whose K/V came from the prefix cache", {},
              static_cast<double>(s.prefix_cached_tokens));
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [name, slot] : models_) {
      w.Gauge("flotilla_engine_weight_version", "Policy version in service", {{"model", name}},
              static_cast<double>(slot->version));
    }
  });
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  scheduler_.join();
  if (delivery_.joinable()) {
    {
      std::lock_guard<std::mutex> l(delivery_mu_);
      delivery_stop_ = true;
    }
    delivery_cv_.notify_all();
    delivery_.join();
  }
  if (profile_.enabled) {
    std::fprintf(stderr, "engine profile threads: scheduler %s; delivery %s\n", profile_.scheduler_thread.c_str(),
                 delivery_thread_.c_str());
  }
  for (const auto& [rows, t] : profile_.by_rows) {
    const double n = static_cast<double>(t.steps);
    std::fprintf(stderr,
                 "engine profile rows=%zu steps=%llu ms/step: plan=%.3f forward=%.3f sample=%.3f record=%.3f "
                 "deliver=%.3f between_steps=%.3f overlap=%.3f max_forward=%.3f\n",
                 rows, static_cast<unsigned long long>(t.steps), t.plan_ms / n, t.forward_ms / n, t.sample_ms / n,
                 t.record_ms / n, t.deliver_ms / n, t.between_ms / n, t.overlap_ms / n, t.max_forward_ms);
  }
  std::error_code ec;
  if (own_state_dir_) {
    std::filesystem::remove_all(state_dir_, ec);
  } else {
    for (auto& [h, s] : saved_) {
      if (!s.file.empty()) std::filesystem::remove(s.file, ec);
    }
  }
}

absl::StatusOr<std::unique_ptr<ModelBackend>> EngineImpl::NewBackend(const ModelConfig& config) {
  if (options_.backend == "cuda") {
    return CreateCudaBackend(config, options_.kv_page_tokens, options_.kv_memory_bytes);
  }
  return CreateCpuBackend(config, options_.kv_page_tokens, options_.kv_memory_bytes, &pool_);
}

ModelSlot* EngineImpl::FindModelLocked(const std::string& name) const {
  auto it = models_.find(name.empty() ? default_model_ : name);
  return it == models_.end() ? nullptr : it->second.get();
}

absl::Status EngineImpl::InstallModel(const std::string& name,
                                      std::shared_ptr<const ModelWeights> weights) {
  if (name.empty()) return absl::InvalidArgumentError("model name must not be empty");
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ModelSlot* slot = FindModelLocked(name); slot != nullptr) {
      if (slot->config.ToJson() != weights->config.ToJson()) {
        return absl::InvalidArgumentError(absl::StrCat("model '", name, "': new weights have a different config"));
      }
    }
  }
  ModelSlot* existing = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    existing = FindModelLocked(name);
  }
  if (existing != nullptr) {
    std::lock_guard<std::mutex> stage(existing->stage_mu);
    RETURN_IF_ERROR(StageLocked(existing, std::move(weights)));
    return CommitLocked(existing).status();
  }
  StepLock step(this);
  const int64_t version = weights->version;
  auto slot = std::make_unique<ModelSlot>();
  slot->name = name;
  slot->config = weights->config;
  ASSIGN_OR_RETURN(slot->backend, NewBackend(weights->config));
  RETURN_IF_ERROR(slot->backend->SetWeights(std::move(weights)));
  slot->version = version;
  InitPages(slot.get());
  std::lock_guard<std::mutex> l(mu_);
  if (default_model_.empty()) default_model_ = name;
  models_[name] = std::move(slot);
  return absl::OkStatus();
}

absl::Status EngineImpl::InstallRandomModel(const std::string& name, const ModelConfig& config,
                                            uint64_t seed, float stddev, int64_t version) {
  RETURN_IF_ERROR(config.Validate());
  StepLock step(this);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (FindModelLocked(name) != nullptr) return absl::AlreadyExistsError(absl::StrCat("model '", name, "' exists"));
  }
  auto slot = std::make_unique<ModelSlot>();
  slot->name = name;
  slot->config = config;
  ASSIGN_OR_RETURN(slot->backend, NewBackend(config));
  RETURN_IF_ERROR(slot->backend->SetRandomWeights(seed, stddev));
  slot->version = version;
  InitPages(slot.get());
  std::lock_guard<std::mutex> l(mu_);
  if (default_model_.empty()) default_model_ = name;
  models_[name] = std::move(slot);
  return absl::OkStatus();
}

absl::Status EngineImpl::LoadModel(const std::string& name, const ModelConfig& config,
                                   const std::string& path, int64_t version) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ModelSlot* slot = FindModelLocked(name); slot != nullptr && !name.empty()) {
      if (slot->config.ToJson() != config.ToJson()) {
        return absl::InvalidArgumentError(absl::StrCat("model '", name, "' is loaded with a different config"));
      }
    }
  }
  ASSIGN_OR_RETURN(auto weights, ModelWeights::Load(config, path, version));
  return InstallModel(name, std::move(weights));
}

absl::Status EngineImpl::LoadHfModel(const std::string& name, const std::string& dir, int64_t version) {
  if (name.empty()) return absl::InvalidArgumentError("model name must not be empty");
  ASSIGN_OR_RETURN(HfConfig config, HfConfig::FromDir(dir));
  if (options_.backend != "cpu" && options_.backend != "cuda") {
    return absl::UnimplementedError(absl::StrCat(options_.backend, " backend: model_type ", config.model_type,
                                                 " not supported yet (the cpu backend runs it)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HfCheckpoint> ckpt, HfCheckpoint::Open(dir));
  // The CPU backend computes from f32 copies of the tensors; the CUDA backend uploads them from
  // the mapping (no host copy), under the step lock as it shares the device with running steps.
  std::shared_ptr<const HfWeights> weights;
  if (options_.backend == "cpu") {
    ASSIGN_OR_RETURN(weights, HfWeights::Load(config, *ckpt));
  }
  StepLock step(this);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (FindModelLocked(name) != nullptr) return absl::AlreadyExistsError(absl::StrCat("model '", name, "' exists"));
  }
  auto slot = std::make_unique<ModelSlot>();
  slot->name = name;
  if (options_.backend == "cuda") {
    ASSIGN_OR_RETURN(slot->backend, CreateHfCudaBackend(config, ckpt.get(), options_.kv_page_tokens,
                                                        options_.kv_memory_bytes));
  } else {
    ASSIGN_OR_RETURN(slot->backend, CreateHfCpuBackend(std::move(weights), options_.kv_page_tokens,
                                                       options_.kv_memory_bytes, &pool_));
  }
  slot->config = slot->backend->config();
  slot->version = version;
  InitPages(slot.get());
  std::lock_guard<std::mutex> l(mu_);
  if (default_model_.empty()) default_model_ = name;
  models_[name] = std::move(slot);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<ModelSlot*, ModelConfig>> EngineImpl::LoadedModel(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  ModelSlot* slot = FindModelLocked(name);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no model '", name, "'"));
  return std::make_pair(slot, slot->config);
}

absl::Status EngineImpl::StageLocked(ModelSlot* slot, std::shared_ptr<const ModelWeights> weights) {
  slot->staged_version = -1;
  const int64_t version = weights->version;
  // No step lock: the backend stages beside the weights its steps use.
  RETURN_IF_ERROR(slot->backend->StageWeights(std::move(weights)));
  slot->staged_version = version;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EngineImpl::CommitLocked(ModelSlot* slot) {
  if (slot->staged_version < 0) {
    return absl::FailedPreconditionError(absl::StrCat("model '", slot->name, "' has no staged weights"));
  }
  const int64_t version = std::exchange(slot->staged_version, -1);
  std::shared_ptr<const void> old;
  {
    const auto stall_start = std::chrono::steady_clock::now();
    StepLock step(this);
    ASSIGN_OR_RETURN(old, slot->backend->CommitWeights());
    std::lock_guard<std::mutex> l(mu_);
    slot->version = version;
    ++slot->weights_epoch;
    slot->pages->Invalidate();
    if (metrics_.weight_swap_stall_seconds != nullptr) {
      metrics_.weight_swap_stall_seconds->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stall_start).count());
    }
  }
  old.reset();  // the replaced weights are freed while steps run again
  return version;
}

absl::Status EngineImpl::ReadAndStage(ModelSlot* slot, const ModelConfig& config, const std::string& path,
                                      int64_t version, std::unique_lock<std::mutex>* stage) {
  // Reading and checking the file runs while steps continue, and before stage_mu.
  if (slot->backend->StagesFromFile()) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, OpenCheckedWeights(config, path));
    *stage = std::unique_lock<std::mutex>(slot->stage_mu);
    slot->staged_version = -1;
    RETURN_IF_ERROR(slot->backend->StageWeightsFromFile(*file));
    slot->staged_version = version;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto weights, ModelWeights::Load(config, path, version));
  *stage = std::unique_lock<std::mutex>(slot->stage_mu);
  return StageLocked(slot, std::move(weights));
}

absl::Status EngineImpl::StageWeights(const std::string& name, const std::string& path, int64_t version) {
  ASSIGN_OR_RETURN(auto loaded, LoadedModel(name));
  std::unique_lock<std::mutex> stage;
  return ReadAndStage(loaded.first, loaded.second, path, version, &stage);
}

absl::StatusOr<int64_t> EngineImpl::CommitWeights(const std::string& name) {
  ASSIGN_OR_RETURN(auto loaded, LoadedModel(name));
  std::lock_guard<std::mutex> stage(loaded.first->stage_mu);
  return CommitLocked(loaded.first);
}

absl::Status EngineImpl::UpdateWeights(const std::string& name, const std::string& path,
                                       int64_t version) {
  ASSIGN_OR_RETURN(auto loaded, LoadedModel(name));
  std::unique_lock<std::mutex> stage;
  RETURN_IF_ERROR(ReadAndStage(loaded.first, loaded.second, path, version, &stage));
  return CommitLocked(loaded.first).status();
}

void EngineImpl::InitPages(ModelSlot* slot) {
  slot->pages = std::make_unique<PagePool>(slot->backend->num_pages(), slot->backend->page_tokens());
}

absl::Status EngineImpl::EnsurePagesLocked(Sequence* seq, int32_t tokens) {
  const uint32_t pt = seq->model->backend->page_tokens();
  const size_t need = (static_cast<size_t>(tokens) + pt - 1) / pt;
  while (seq->pages.size() < need) {
    absl::StatusOr<int32_t> page = seq->model->pages->Allocate();
    if (!page.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat("KV cache of model '", seq->model->name, "' is full"));
    }
    seq->pages.push_back(*page);
  }
  return absl::OkStatus();
}

void EngineImpl::ReleasePagesLocked(ModelSlot* slot, std::vector<int32_t>* pages) {
  for (int32_t p : *pages) slot->pages->Release(p);
  pages->clear();
}

absl::Status EngineImpl::UsePrefixCacheLocked(Sequence* seq) {
  seq->prefix_looked_up = true;
  ModelSlot* slot = seq->model;
  seq->kv_epoch = slot->weights_epoch;
  if (!options_.prefix_cache || seq->cached != 0 || !seq->pages.empty()) return absl::OkStatus();
  // The last prompt token always runs: its logits are the next token's distribution.
  const int32_t limit = static_cast<int32_t>(seq->tokens.size()) - 1;
  PagePool::Match m = slot->pages->Lookup(seq->kv_epoch, seq->tokens, limit);
  seq->pages = std::move(m.shared);
  int32_t reused = static_cast<int32_t>(seq->pages.size()) * static_cast<int32_t>(slot->backend->page_tokens());
  if (m.copy_tokens > 0) {
    // Copy on write: the diverging block's matching positions go into a page of our own.
    slot->pages->Retain(m.copy_from);
    absl::StatusOr<int32_t> page = slot->pages->Allocate();
    absl::Status st = page.status();
    if (page.ok()) {
      st = slot->backend->CopyPage(m.copy_from, *page);
      if (st.ok()) {
        seq->pages.push_back(*page);
        reused += m.copy_tokens;
      } else {
        slot->pages->Release(*page);
      }
    }
    slot->pages->Release(m.copy_from);
    if (!st.ok() && !absl::IsResourceExhausted(st)) return st;
  }
  seq->cached = reused;
  seq->pending_prompt -= std::min(seq->pending_prompt, reused);
  stats_.prefix_cached_tokens += static_cast<uint64_t>(reused);
  return absl::OkStatus();
}

void EngineImpl::RegisterBlocksLocked(Sequence* seq, bool freeing) {
  ModelSlot* slot = seq->model;
  if (!options_.prefix_cache || !seq->cacheable || !seq->prefix_looked_up) return;
  if (seq->kv_epoch != slot->weights_epoch) {
    seq->cacheable = false;  // part of its K/V was computed under other weights
    return;
  }
  // A live sequence's last cached position may be computed again (a taken-back token), so its
  // blocks are final only up to cached - 1; a freed one's are all final.
  const int32_t final_tokens = freeing ? seq->cached : seq->cached - 1;
  slot->pages->Register(seq->kv_epoch, seq->tokens, seq->pages, final_tokens, freeing, &seq->registered_blocks,
                        &seq->chain_key);
}

void EngineImpl::FreeSequenceLocked(Sequence* seq) {
  RegisterBlocksLocked(seq, /*freeing=*/true);
  ReleasePagesLocked(seq->model, &seq->pages);
  seqs_.erase(seq->id);
}

void EngineImpl::FinishLocked(Sequence* seq, FinishReason reason, const std::string& error,
                              std::vector<Delivery>* out) {
  Delivery d;
  d.sink = std::move(seq->sink);
  d.update.sequence_id = seq->id;
  d.update.finish = reason;
  d.update.prefilled_tokens = seq->call_prefilled;
  d.update.error = error;
  seq->running = false;
  seq->interrupt = false;
  seq->sink = nullptr;
  const bool keep = reason == FinishReason::kInterrupted || (seq->keep && reason != FinishReason::kError &&
                                                              reason != FinishReason::kCancelled);
  if (!keep) FreeSequenceLocked(seq);
  if (d.sink) out->push_back(std::move(d));
}

absl::StatusOr<std::string> EngineImpl::Generate(const GenerateRequest& req, TokenSink sink) {
  std::lock_guard<std::mutex> l(mu_);
  ModelSlot* slot = FindModelLocked(req.model);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no model '", req.model, "' loaded"));
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= slot->config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", t, " outside [0, ", slot->config.vocab_size, ")"));
    }
  }
  Sequence* seq = nullptr;
  if (req.sequence_id.empty()) {
    if (req.prompt.empty()) return absl::InvalidArgumentError("prompt must not be empty");
    auto owned = std::make_unique<Sequence>();
    owned->id = NewId("seq");
    owned->model = slot;
    seq = owned.get();
    seqs_[owned->id] = std::move(owned);
  } else {
    auto it = seqs_.find(req.sequence_id);
    if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no kept sequence '", req.sequence_id, "'"));
    seq = it->second.get();
    if (seq->running) return absl::FailedPreconditionError(absl::StrCat("sequence '", seq->id, "' is running"));
    if (seq->model != slot) return absl::InvalidArgumentError(absl::StrCat("sequence '", seq->id, "' belongs to model '", seq->model->name, "'"));
  }
  if (seq->tokens.size() + req.prompt.size() >= static_cast<size_t>(slot->config.max_context)) {
    if (req.sequence_id.empty()) seqs_.erase(seq->id);
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", req.prompt.size(), " tokens does not fit max_context ", slot->config.max_context));
  }
  seq->tokens.insert(seq->tokens.end(), req.prompt.begin(), req.prompt.end());
  seq->pending_prompt += static_cast<int32_t>(req.prompt.size());
  seq->sampling = req.sampling;
  seq->seed = req.sampling.seed;
  seq->rng = SequenceRng(req.sampling.seed);
  seq->sink = std::move(sink);
  seq->keep = req.keep_state;
  seq->running = true;
  seq->call_generated = 0;
  seq->call_prefilled = 0;
  cv_.notify_all();
  return seq->id;
}

absl::StatusOr<GenerateResult> EngineImpl::GenerateBlocking(const GenerateRequest& request) {
  auto result = std::make_shared<GenerateResult>();
  auto done = std::make_shared<absl::Notification>();
  auto error = std::make_shared<std::string>();
  ASSIGN_OR_RETURN(std::string id, Generate(request, [result, done, error](const GenerateUpdate& u) {
    result->tokens.insert(result->tokens.end(), u.tokens.begin(), u.tokens.end());
    if (u.finish != FinishReason::kRunning) {
      result->finish = u.finish;
      result->prefilled_tokens = u.prefilled_tokens;
      *error = u.error;
      done->Notify();
    }
  }));
  done->WaitForNotification();
  result->sequence_id = id;
  if (result->finish == FinishReason::kError) return absl::InternalError(*error);
  return *result;
}

absl::StatusOr<uint32_t> EngineImpl::Interrupt(const std::string& sequence_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = seqs_.find(sequence_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence '", sequence_id, "'"));
  Sequence* seq = it->second.get();
  if (!seq->running) return absl::FailedPreconditionError(absl::StrCat("sequence '", sequence_id, "' is not running"));
  seq->interrupt = true;
  ++stats_.interrupts;
  cv_.notify_all();
  return seq->call_generated;
}

std::vector<std::string> EngineImpl::InterruptAll() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> ids;
  for (auto& [id, seq] : seqs_) {
    if (seq->running) {
      seq->interrupt = true;
      ++stats_.interrupts;
      ids.push_back(id);
    }
  }
  cv_.notify_all();
  return ids;
}

absl::Status EngineImpl::Resume(const std::string& sequence_id, const SamplingParams& sampling,
                                TokenSink sink) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = seqs_.find(sequence_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no kept sequence '", sequence_id, "'"));
  Sequence* seq = it->second.get();
  if (seq->running) return absl::FailedPreconditionError(absl::StrCat("sequence '", sequence_id, "' is running"));
  if (static_cast<int32_t>(seq->tokens.size()) >= seq->model->config.max_context) {
    return absl::FailedPreconditionError(absl::StrCat("sequence '", sequence_id, "' is at max_context"));
  }
  // The random stream continues where it stopped unless a different seed is asked for.
  if (sampling.seed != seq->seed) {
    seq->seed = sampling.seed;
    seq->rng = SequenceRng(sampling.seed);
  }
  seq->sampling = sampling;
  seq->sink = std::move(sink);
  seq->running = true;
  seq->keep = true;
  seq->call_generated = 0;
  seq->call_prefilled = 0;
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EngineImpl::PolicyVersion(const std::string& model) const {
  std::lock_guard<std::mutex> l(mu_);
  ModelSlot* slot = FindModelLocked(model);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no model '", model, "' loaded"));
  return slot->version;
}

absl::StatusOr<ModelConfig> EngineImpl::Config(const std::string& model) const {
  std::lock_guard<std::mutex> l(mu_);
  ModelSlot* slot = FindModelLocked(model);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no model '", model, "' loaded"));
  return slot->config;
}

EngineStats EngineImpl::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineStats s = stats_;
  s.active_sequences = 0;
  for (const auto& [id, seq] : seqs_) s.active_sequences += seq->running ? 1 : 0;
  s.kv_pages_used = 0;
  s.kv_pages_total = 0;
  s.kv_pages_cached = 0;
  for (const auto& [name, slot] : models_) {
    s.kv_pages_total += slot->pages->num_pages();
    s.kv_pages_used += slot->pages->referenced();
    s.kv_pages_cached += slot->pages->cached();
  }
  return s;
}

std::vector<std::string> EngineImpl::ModelNames() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> names;
  if (!default_model_.empty()) names.push_back(default_model_);
  for (const auto& [name, slot] : models_) {
    if (name != default_model_) names.push_back(name);
  }
  return names;
}

void EngineImpl::SchedulerLoop() {
  for (;;) {
    bool ran = false, stop = false;
    {
      std::lock_guard<std::mutex> step(step_mu_);
      // Consecutive steps under one hold while rows are pending (their records are made during
      // the next forward); the hold ends, with everything recorded and sent, when a caller waits
      // for step_mu_ or there is nothing to run.
      do {
        bool hold;
        {
          std::lock_guard<std::mutex> l(mu_);
          stop = stop_;
          hold = hold_;
          if (!stop) PurgeExpiredLocked();
        }
        if (stop) break;
        const auto step_start = std::chrono::steady_clock::now();
        ran = !hold && RunStep();
        if (ran && metrics_.step_seconds != nullptr) {
          metrics_.step_seconds->Observe(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
        }
      } while (ran && !pending_.empty() && step_waiters_.load() == 0);
      DeliverPending(&pending_);
    }
    if (stop) {
      if (profile_.enabled) profile_.scheduler_thread = ThreadCpuAndWait();
      return;
    }
    // A caller waiting for step_mu_ gets it before the next step (a mutex does not queue).
    while (step_waiters_.load() > 0) std::this_thread::yield();
    if (!ran) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(200), [&] {
        if (stop_) return true;
        if (hold_) return false;
        for (auto& [id, seq] : seqs_) {
          if (seq->running) return true;
        }
        return false;
      });
    }
  }
}

void EngineImpl::HoldSteps(bool hold) {
  {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = hold;
  }
  cv_.notify_all();
}

void EngineImpl::ApplyPendingLocked(std::vector<PendingRow>* rows, std::vector<Delivery>* out, bool borrow_sinks) {
  for (PendingRow& row : *rows) {
    Sequence* seq = row.seq;
    row.rec.experts.assign(row.experts->begin() + row.experts_first,
                           row.experts->begin() + row.experts_first + row.experts_count);
    seq->records.push_back(row.rec);
    if (!seq->sink) continue;
    Delivery d;
    if (borrow_sinks) {
      d.running_sink = &seq->sink;
    } else {
      d.sink = seq->sink;
    }
    d.update.sequence_id = seq->id;
    d.update.tokens.push_back(std::move(row.rec));
    d.update.prefilled_tokens = row.prefilled;
    out->push_back(std::move(d));
  }
  rows->clear();
}

void EngineImpl::TakeBackPendingLocked(Sequence* seq) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->seq != seq) continue;
    // The token's input row is processed again (its K/V is rewritten with the same values;
    // the engine's token counts include both passes, as both ran).
    seq->tokens.pop_back();
    seq->cached -= 1;
    seq->call_generated -= 1;
    seq->rng.set_state(it->rng_before);
    pending_.erase(it);
    return;
  }
}

void EngineImpl::DeliverPending(std::vector<PendingRow>* rows) {
  if (rows->empty()) return;
  std::vector<Delivery> deliveries;
  {
    std::lock_guard<std::mutex> l(mu_);
    ApplyPendingLocked(rows, &deliveries, true);
  }
  for (Delivery& d : deliveries) d.Send();
}

void EngineImpl::DeliveryLoop() {
  std::unique_lock<std::mutex> l(delivery_mu_);
  for (;;) {
    delivery_cv_.wait(l, [&] { return delivery_stop_ || !delivery_rows_.empty(); });
    if (delivery_rows_.empty()) {
      if (profile_.enabled) delivery_thread_ = ThreadCpuAndWait();
      return;
    }
    std::vector<PendingRow> rows = std::move(delivery_rows_);
    delivery_rows_.clear();
    l.unlock();
    const auto t0 = profile_.enabled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    DeliverPending(&rows);
    const double ms =
        profile_.enabled ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() : 0;
    l.lock();
    delivery_ms_ = ms;
    delivery_busy_ = false;
    delivery_cv_.notify_all();
  }
}

void EngineImpl::StartDelivery() {
  if (pending_.empty()) return;
  {
    std::lock_guard<std::mutex> l(delivery_mu_);
    delivery_rows_ = std::move(pending_);
    delivery_busy_ = true;
  }
  pending_.clear();
  delivery_cv_.notify_all();
}

double EngineImpl::FinishDelivery() {
  if (!overlap_) return 0;
  std::unique_lock<std::mutex> l(delivery_mu_);
  delivery_cv_.wait(l, [&] { return !delivery_busy_; });
  return std::exchange(delivery_ms_, 0.0);
}

bool EngineImpl::RunStep() {
  std::vector<ModelSlot*> slots;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [name, slot] : models_) slots.push_back(slot.get());
  }
  bool ran = false;
  for (ModelSlot* slot : slots) {
    std::vector<Delivery> deliveries;
    size_t rows = 0;
    ran = RunModelStep(slot, &deliveries, &rows) || ran;
    const auto t0 = std::chrono::steady_clock::now();
    for (Delivery& d : deliveries) d.Send();
    if (profile_.enabled && rows > 0) {
      const auto t1 = std::chrono::steady_clock::now();
      profile_.by_rows[rows].deliver_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
      profile_.last_end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
    }
  }
  return ran;
}

}  // namespace flotilla::inference
