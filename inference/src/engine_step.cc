// One continuous-batching step, and scoring (prefill only).
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine_impl.h"
#include "flotilla/common/status.h"

namespace flotilla::inference {

namespace {
double MillisSince(std::chrono::steady_clock::time_point* t) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - *t).count();
  *t = now;
  return ms;
}
}  // namespace

bool EngineImpl::RunModelStep(ModelSlot* slot, std::vector<Delivery>* out, size_t* rows_run) {
  const ModelConfig& c = slot->config;
  const auto step_start = std::chrono::steady_clock::now();
  auto mark = step_start;
  *rows_run = 0;
  StepInput& in = slot->step_input;
  in.tokens.clear();
  in.positions.clear();
  in.row_seq.clear();
  in.logit_rows.clear();
  in.replay_experts.clear();
  in.sampling.clear();
  size_t tables = 0;  // page tables of this step in in.seq_pages (the rest are last step's)
  struct Planned {
    Sequence* seq;
    int32_t first_row;
    int32_t rows;
    int32_t logit_index;  // -1: no token this step (prefill continues)
    uint64_t rng_before;  // the sequence's RNG before this step's draw
  };
  std::vector<Planned> plan;
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    version = slot->version;
    std::vector<Sequence*> running;
    for (auto& [id, seq] : seqs_) {
      if (seq->model == slot && seq->running) running.push_back(seq.get());
    }
    // Token boundary: interrupts take effect before any more work. A sequence that finishes
    // here gets its last step's record and delivery first (they may still be pending).
    std::vector<Sequence*> live;
    for (Sequence* seq : running) {
      if (seq->interrupt) {
        TakeBackPendingLocked(seq);
        ApplyPendingLocked(&pending_, out, false);
        FinishLocked(seq, FinishReason::kInterrupted, "", out);
      } else {
        live.push_back(seq);
      }
    }
    // Decode rows first (one each), then prefill chunks in what budget is left.
    std::stable_sort(live.begin(), live.end(), [](Sequence* a, Sequence* b) {
      return (a->tokens.size() - a->cached) < (b->tokens.size() - b->cached);
    });
    int32_t budget = static_cast<int32_t>(options_.max_step_tokens);
    for (Sequence* seq : live) {
      if (plan.size() >= options_.max_batch || budget <= 0) break;
      if (!seq->prefix_looked_up) {
        if (absl::Status s = UsePrefixCacheLocked(seq); !s.ok()) {
          ApplyPendingLocked(&pending_, out, false);
          FinishLocked(seq, FinishReason::kError, std::string(s.message()), out);
          continue;
        }
      }
      const int32_t uncached = static_cast<int32_t>(seq->tokens.size()) - seq->cached;
      // While other sequences run, a long prompt goes in chunks of prefill_chunk_tokens so that
      // no step (and no other sequence's next token) waits on a whole long prefill.
      const int32_t chunk = live.size() > 1 && options_.prefill_chunk_tokens > 0
                                ? static_cast<int32_t>(options_.prefill_chunk_tokens)
                                : budget;
      const int32_t rows = std::min({uncached, budget, std::max<int32_t>(1, chunk)});
      if (rows <= 0) continue;
      if (absl::Status s = EnsurePagesLocked(seq, seq->cached + rows); !s.ok()) {
        ApplyPendingLocked(&pending_, out, false);
        FinishLocked(seq, FinishReason::kError, std::string(s.message()), out);
        continue;
      }
      const int32_t seq_index = static_cast<int32_t>(tables);
      if (tables == in.seq_pages.size()) in.seq_pages.emplace_back();
      in.seq_pages[tables++].assign(seq->pages.begin(), seq->pages.end());
      Planned p{seq, static_cast<int32_t>(in.tokens.size()), rows, -1, seq->rng.state()};
      for (int32_t i = 0; i < rows; ++i) {
        in.tokens.push_back(seq->tokens[seq->cached + i]);
        in.positions.push_back(seq->cached + i);
        in.row_seq.push_back(seq_index);
      }
      if (rows == uncached) {
        p.logit_index = static_cast<int32_t>(in.logit_rows.size());
        in.logit_rows.push_back(p.first_row + rows - 1);
      }
      plan.push_back(p);
      budget -= rows;
    }
  }
  in.seq_pages.resize(tables);
  if (plan.empty()) return !out->empty();

  // The backend samples on the device when it can take every row of the step (no nucleus row):
  // the same draws as SampleToken, and only tokens come back instead of the logits. A running
  // sequence's sampling parameters and RNG are touched only by this thread (Generate/Resume
  // refuse running sequences).
  bool device_sampling = slot->backend->SamplesOnDevice();
  for (const Planned& p : plan) {
    const float top_p = p.seq->sampling.top_p;
    if (p.logit_index >= 0 && p.seq->sampling.temperature > 0.0f && top_p > 0.0f && top_p < 1.0f) device_sampling = false;
  }
  if (device_sampling && !in.logit_rows.empty()) {
    in.sampling.resize(in.logit_rows.size());
    for (const Planned& p : plan) {
      if (p.logit_index < 0) continue;
      RowSampling& rs = in.sampling[static_cast<size_t>(p.logit_index)];
      rs.temperature = p.seq->sampling.temperature;
      rs.top_logprobs = p.seq->sampling.top_logprobs;
      rs.rng_state = p.seq->rng.state();
    }
  }
  const double plan_ms = MillisSince(&mark);
  *rows_run = in.tokens.size();
  StepOutput result;
  // The last step's records and deliveries are made while this forward runs.
  StartDelivery();
  absl::Status status = slot->backend->Forward(in, &result);
  const double forward_ms = MillisSince(&mark);
  const double overlap_ms = FinishDelivery();
  std::vector<TokenRecord> sampled(plan.size());
  if (status.ok() && !in.sampling.empty()) {
    for (size_t i = 0; i < plan.size(); ++i) {
      const Planned& p = plan[i];
      if (p.logit_index < 0) continue;
      SampledRow& row = result.sampled[static_cast<size_t>(p.logit_index)];
      TokenRecord& rec = sampled[i];
      rec.token = row.token;
      rec.logprob = row.logprob;
      rec.top_ids = std::move(row.top_ids);
      rec.top_logprobs = std::move(row.top_logprobs);
      if (p.seq->sampling.temperature > 0.0f) p.seq->rng.Next();  // the draw the device made
    }
  } else if (status.ok()) {
    // Host sampling runs outside mu_ and in parallel: each task owns one sequence's RNG, so
    // the draws stay what they would be serially.
    pool_.ParallelFor(static_cast<int>(plan.size()), [&](int i) {
      const Planned& p = plan[static_cast<size_t>(i)];
      if (p.logit_index < 0) return;
      SampleToken(&result.logits[static_cast<size_t>(p.logit_index) * c.vocab_size], c.vocab_size,
                  p.seq->sampling, &p.seq->rng, &sampled[static_cast<size_t>(i)]);
    });
  }

  const double sample_ms = MillisSince(&mark);
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.steps;
  // Routing width per row: n_layers x top_k, or a Hugging Face family's MoE layers x top_k.
  const int32_t LK = static_cast<int32_t>(result.experts.size() / std::max<size_t>(1, in.tokens.size()));
  // The step's routing, shared with the rows whose records are made during the next forward.
  auto experts = std::make_shared<const std::vector<int32_t>>(std::move(result.experts));
  out->reserve(out->size() + plan.size());
  for (size_t pi = 0; pi < plan.size(); ++pi) {
    const Planned& p = plan[pi];
    Sequence* seq = p.seq;
    if (!status.ok()) {
      FinishLocked(seq, FinishReason::kError, std::string(status.message()), out);
      continue;
    }
    const int32_t prefill = std::min(p.rows, seq->pending_prompt);
    seq->pending_prompt -= prefill;
    seq->call_prefilled += static_cast<uint32_t>(prefill);
    stats_.prefill_tokens += static_cast<uint64_t>(prefill);
    stats_.decode_tokens += static_cast<uint64_t>(p.rows - prefill);
    seq->cached += p.rows;
    RegisterBlocksLocked(seq, /*freeing=*/false);
    if (p.logit_index < 0) continue;
    TokenRecord rec = std::move(sampled[pi]);
    rec.policy_version = version;
    const int32_t row = p.first_row + p.rows - 1;
    seq->tokens.push_back(rec.token);
    ++seq->call_generated;
    FinishReason finish = FinishReason::kRunning;
    if (IsStopTokenFor(seq->sampling, rec.token)) {
      finish = FinishReason::kStop;
    } else if (seq->call_generated >= seq->sampling.max_new_tokens ||
               static_cast<int32_t>(seq->tokens.size()) >= c.max_context) {
      finish = FinishReason::kLength;
    }
    if (finish == FinishReason::kRunning && overlap_) {
      pending_.push_back({seq, std::move(rec), seq->call_prefilled, p.rng_before, experts, row * LK, LK});
      continue;
    }
    rec.experts.assign(experts->begin() + static_cast<ptrdiff_t>(row) * LK,
                       experts->begin() + static_cast<ptrdiff_t>(row + 1) * LK);
    seq->records.push_back(rec);
    if (finish == FinishReason::kRunning) {
      if (seq->sink) {
        Delivery d;
        d.running_sink = &seq->sink;
        d.update.sequence_id = seq->id;
        d.update.tokens.push_back(std::move(rec));
        d.update.prefilled_tokens = seq->call_prefilled;
        out->push_back(std::move(d));
      }
    } else {
      const size_t before = out->size();
      FinishLocked(seq, finish, "", out);
      if (out->size() > before) out->back().update.tokens.push_back(std::move(rec));
    }
  }
  if (profile_.enabled) {
    StepTimes& t = profile_.by_rows[in.tokens.size()];
    ++t.steps;
    t.plan_ms += plan_ms;
    t.forward_ms += forward_ms;
    t.max_forward_ms = std::max(t.max_forward_ms, forward_ms);
    t.sample_ms += sample_ms;
    t.overlap_ms += overlap_ms;
    t.record_ms += MillisSince(&mark);
    // From the end of the previous step's delivery to this step's start (scheduler loop, locks).
    const int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(step_start.time_since_epoch()).count();
    if (profile_.last_end_ns > 0 && start_ns > profile_.last_end_ns) t.between_ms += (start_ns - profile_.last_end_ns) * 1e-6;
  }
  return true;
}

bool IsStopTokenFor(const SamplingParams& p, int32_t t) {
  if (p.stop_tokens.empty()) return t == kEndTurn || t == kEos;
  return std::find(p.stop_tokens.begin(), p.stop_tokens.end(), t) != p.stop_tokens.end();
}

absl::StatusOr<ScoreResult> EngineImpl::Score(const std::string& model,
                                              const std::vector<int32_t>& tokens, uint32_t start,
                                              uint32_t top_k, bool full_vocab) {
  StepLock step(this);
  ModelSlot* slot;
  Sequence scratch;
  {
    std::lock_guard<std::mutex> l(mu_);
    slot = FindModelLocked(model);
    if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no model '", model, "' loaded"));
    if (tokens.empty()) return absl::InvalidArgumentError("score: tokens must not be empty");
    if (tokens.size() > static_cast<size_t>(slot->config.max_context)) {
      return absl::InvalidArgumentError(absl::StrCat("score: ", tokens.size(), " tokens exceed max_context ", slot->config.max_context));
    }
    scratch.model = slot;
    RETURN_IF_ERROR(EnsurePagesLocked(&scratch, static_cast<int32_t>(tokens.size())));
  }
  const ModelConfig& c = slot->config;
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t first = std::max<int32_t>(1, static_cast<int32_t>(start));
  ScoreResult res;
  std::vector<float> lp;
  absl::Status status;
  const int32_t chunk = static_cast<int32_t>(options_.max_step_tokens);
  for (int32_t begin = 0; begin < n && status.ok(); begin += chunk) {
    const int32_t end = std::min(n, begin + chunk);
    StepInput in;
    in.seq_pages.push_back(scratch.pages);
    for (int32_t i = begin; i < end; ++i) {
      in.tokens.push_back(tokens[i]);
      in.positions.push_back(i);
      in.row_seq.push_back(0);
      // Row i predicts token i + 1.
      if (i + 1 >= first && i + 1 < n) in.logit_rows.push_back(i - begin);
    }
    StepOutput out;
    status = slot->backend->Forward(in, &out);
    if (!status.ok()) break;
    for (size_t k = 0; k < in.logit_rows.size(); ++k) {
      const int32_t target = tokens[begin + in.logit_rows[k] + 1];
      LogSoftmax(&out.logits[k * c.vocab_size], c.vocab_size, &lp);
      res.logprobs.push_back(lp[target]);
      if (top_k > 0) {
        std::vector<int32_t> ids;
        std::vector<float> vals;
        TopK(lp, top_k, &ids, &vals);
        res.top_ids.insert(res.top_ids.end(), ids.begin(), ids.end());
        res.top_logprobs.insert(res.top_logprobs.end(), vals.begin(), vals.end());
      }
      if (full_vocab) res.full_logprobs.insert(res.full_logprobs.end(), lp.begin(), lp.end());
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  ReleasePagesLocked(slot, &scratch.pages);
  if (!status.ok()) return status;
  stats_.prefill_tokens += static_cast<uint64_t>(n);
  return res;
}

}  // namespace flotilla::inference
