#include "flotilla/worker/generation_gate.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "flotilla/common/logging.h"

namespace flotilla::worker {
namespace {

// A sequence that ended between being listed and being stopped is NotFound (released) or
// FailedPrecondition (no longer running): nothing to stop.
void InterruptIfRunning(inference::Engine& engine, const std::string& sequence_id) {
  absl::StatusOr<uint32_t> r = engine.Interrupt(sequence_id);
  if (!r.ok() && !absl::IsNotFound(r.status()) && !absl::IsFailedPrecondition(r.status())) {
    FLOG(warn, "generation gate: interrupt failed", {{"sequence", sequence_id}, {"error", std::string(r.status().message())}});
  }
}

}  // namespace

uint32_t GenerationGate::Pause(inference::Engine& engine, int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  open_ = false;
  // A Generate call in progress must land before the engine is told to interrupt.
  cv_.wait(lock, [&] { return starting_ == 0; });
  std::vector<std::string> running;
  for (const auto& [id, c] : calls_) {
    if (!c.parked && !c.sequence_id.empty()) running.push_back(c.sequence_id);
  }
  lock.unlock();
  std::vector<std::string> stopped = engine.InterruptAll();
  std::set<std::string> interrupted(stopped.begin(), stopped.end());
  // Sequences the engine had not scheduled yet are interrupted one by one.
  for (const std::string& s : running) {
    if (!interrupted.contains(s)) InterruptIfRunning(engine, s);
  }
  lock.lock();
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] {
    return std::all_of(calls_.begin(), calls_.end(), [](const auto& kv) { return kv.second.parked; });
  });
  uint32_t parked = 0;
  for (const auto& [id, c] : calls_) parked += c.parked ? 1 : 0;
  return parked;
}

std::vector<std::string> GenerationGate::Parked() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, c] : calls_) {
    if (c.parked) out.push_back(c.sequence_id);
  }
  return out;
}

void GenerationGate::Relocate(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : calls_) {
    if (c.parked && c.sequence_id == from) c.sequence_id = to;
  }
}

void GenerationGate::Fail(const std::string& sequence, absl::Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : calls_) {
    if (c.parked && c.sequence_id == sequence) c.failure = error;
  }
}

void GenerationGate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

void GenerationGate::Shutdown(inference::Engine& engine) {
  std::vector<std::string> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
    for (const auto& [id, c] : calls_) {
      if (!c.parked && !c.sequence_id.empty()) running.push_back(c.sequence_id);
    }
  }
  for (const std::string& s : running) InterruptIfRunning(engine, s);
}

GateStats GenerationGate::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  GateStats s;
  for (const auto& [id, c] : calls_) {
    s.max_call_tokens = std::max(s.max_call_tokens, c.tokens);
    if (c.parked) {
      ++s.parked;
    } else if (!c.sequence_id.empty()) {
      s.min_generating_tokens = s.generating == 0 ? c.tokens : std::min(s.min_generating_tokens, c.tokens);
      ++s.generating;
    }
  }
  s.tokens = tokens_;
  s.resumes = resumes_;
  s.resume_prefill_tokens = resume_prefill_;
  return s;
}

absl::StatusOr<uint64_t> GenerationGate::Enter() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return open_ || shutdown_; });
  if (shutdown_) return absl::CancelledError("generation stopped: the rollout is shutting down");
  uint64_t id = next_call_++;
  calls_[id] = Call();
  ++starting_;
  return id;
}

void GenerationGate::Started(uint64_t call, const std::string& sequence_id) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_[call].sequence_id = sequence_id;
  --starting_;
  cv_.notify_all();
}

void GenerationGate::StartFailed(uint64_t call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
  --starting_;
  cv_.notify_all();
}

void GenerationGate::OnTokens(uint64_t call, size_t n, uint32_t prefilled_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  Call& c = calls_[call];
  c.tokens += static_cast<uint32_t>(n);
  tokens_ += n;
  // prefilled_tokens is a running total within one engine call; after a resume of a sequence
  // with kept KV it stays 0.
  if (c.resumed && prefilled_tokens > c.prefilled) resume_prefill_ += prefilled_tokens - c.prefilled;
  c.prefilled = std::max(c.prefilled, prefilled_tokens);
}

absl::StatusOr<std::string> GenerationGate::Park(uint64_t call) {
  std::unique_lock<std::mutex> lock(mu_);
  calls_[call].parked = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return open_ || shutdown_; });
  Call& c = calls_[call];
  c.parked = false;
  if (shutdown_) return absl::CancelledError("generation stopped: the rollout is shutting down");
  if (!c.failure.ok()) return c.failure;
  // A sequence interrupted while still queued had nothing prefilled: its first prefill is not a
  // re-prefill.
  c.resumed = c.tokens > 0;
  c.prefilled = 0;
  return c.sequence_id;
}

void GenerationGate::Resumed() {
  std::lock_guard<std::mutex> lock(mu_);
  ++resumes_;
}

void GenerationGate::Leave(uint64_t call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
  cv_.notify_all();
}

}  // namespace flotilla::worker
