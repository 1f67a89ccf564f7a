// GenerationGate: lets the owner of an engine stop every generation of the worker's engine
// token generators at a token boundary, do something to the engine (commit new weights, move
// the sequences out of the KV cache and back), and let each generation go on from its kept KV
// state, without the scaffold or the session seeing anything but a longer wait.
//
//   gate.Pause(engine);           // no new generation starts; running ones stop and park
//   engine.CommitWeights(...);    // or SaveState / LoadState + Relocate for each Parked()
//   gate.Open();                  // each parked generation resumes (Engine::Resume)
//
// The engine token generator (NewEngineTokenGenerator with a gate) enters the gate before it
// submits a sequence, reports the tokens it receives, and parks when the engine says
// kInterrupted; it resumes the sequence (under the id Relocate gave it, if any) once the gate
// opens, or fails the call with the error Fail or Shutdown gave it.
//
// Thread-safety: thread-safe. Pause/Open/Relocate/Fail are meant for one controlling thread
// at a time; generators call Enter/Started/OnTokens/Park/Leave from their own threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/inference/engine.h"

namespace flotilla::worker {

// A snapshot of the generations in progress.
struct GateStats {
  uint32_t generating = 0;            // calls with a sequence in the engine, not parked
  uint32_t parked = 0;
  uint32_t min_generating_tokens = 0; // fewest tokens any generating call has received
  uint32_t max_call_tokens = 0;       // most tokens any call in progress has received
  uint64_t tokens = 0;                // tokens received by every call since the gate was made
  uint64_t resumes = 0;               // parked calls that resumed
  uint64_t resume_prefill_tokens = 0; // prefill reported by resumes (0 when the KV was kept)
};

class GenerationGate {
 public:
  GenerationGate() = default;
  GenerationGate(const GenerationGate&) = delete;
  GenerationGate& operator=(const GenerationGate&) = delete;

  // Controller side.
  // Closes the gate, interrupts every generation that has a sequence in `engine` and waits
  // (up to `wait_ms`) until each has parked or finished. Returns how many parked.
  uint32_t Pause(inference::Engine& engine, int64_t wait_ms = 30'000);
  // The sequence ids of the parked generations (as relocated).
  [[nodiscard]] std::vector<std::string> Parked() const;
  // The parked generation of `from` continues under `to` (its state moved: SaveState gives a
  // handle, LoadState a new sequence id).
  void Relocate(const std::string& from, const std::string& to);
  // The parked generation of `sequence` ends with `error` when the gate opens.
  void Fail(const std::string& sequence, absl::Status error);
  // Opens the gate: parked generations resume, new ones may start.
  void Open();
  // Every waiting and future call fails with Cancelled (the owner is going away); calls
  // generating in `engine` are interrupted so that they end too.
  void Shutdown(inference::Engine& engine);
  [[nodiscard]] GateStats Stats() const;

  // Generator side. A call is a token: Enter gives it, the others take it.
  // Waits while the gate is closed; Cancelled after Shutdown.
  absl::StatusOr<uint64_t> Enter();
  // The call's engine sequence exists (Generate returned); ends the start window Pause waits for.
  void Started(uint64_t call, const std::string& sequence_id);
  // The call's Generate failed: it leaves without a sequence.
  void StartFailed(uint64_t call);
  void OnTokens(uint64_t call, size_t n, uint32_t prefilled_tokens);
  // The engine interrupted the call's sequence: waits until the gate opens. Returns the id to
  // resume (relocated or not), or the error the call must end with.
  absl::StatusOr<std::string> Park(uint64_t call);
  // The call resumed under a sequence (Engine::Resume succeeded).
  void Resumed();
  void Leave(uint64_t call);

 private:
  struct Call {
    std::string sequence_id;   // "" until Started
    bool parked = false;
    uint32_t tokens = 0;
    bool resumed = false;      // since the last park: a resume prefill counts as re-prefill
    uint32_t prefilled = 0;    // the engine's running prefill total for the current engine call
    absl::Status failure;
  };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;            // GUARDED_BY(mu_)
  bool shutdown_ = false;       // GUARDED_BY(mu_)
  uint32_t starting_ = 0;       // calls between Enter and Started/StartFailed; GUARDED_BY(mu_)
  uint64_t next_call_ = 1;      // GUARDED_BY(mu_)
  std::map<uint64_t, Call> calls_;  // GUARDED_BY(mu_)
  uint64_t tokens_ = 0;         // GUARDED_BY(mu_)
  uint64_t resumes_ = 0;        // GUARDED_BY(mu_)
  uint64_t resume_prefill_ = 0; // GUARDED_BY(mu_)
};

}  // namespace flotilla::worker
