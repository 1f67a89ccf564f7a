// EmbeddedWorker: the in-process default a single `flotilla` binary runs: the CPU engine with
// one model, a ChatService recording into a SQLite trajectory store, and optionally the wire
// APIs on an HTTP address.
//
// The model is a Hugging Face model folder (config.json with model_type, safetensors,
// tokenizer.json and tokenizer_config.json: served through its tokenizer and chat template),
// PREFIX.safetensors + PREFIX.json (as written by the trainer's init_model.py), or a folder
// with a Flotilla config.json and model.safetensors (as `flotilla merge` writes).
// Without a prefix the embedded default model is used: <state_dir>/default-model, written once
// with random weights by `python3 -m flotilla_trainer.init_model` (found through
// FLOTILLA_SOURCE_DIR or next to the binary's source tree).
//
// Thread-safety: the accessors are thread-safe; Stop() once. Owns everything it starts.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/inference/engine.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/hf_chat.h"
#include "flotilla/common/http_server.h"
#include "flotilla/worker/trajectory_store.h"
#include "flotilla/worker/wire_api.h"

namespace flotilla::worker {

struct EmbeddedWorkerOptions {
  std::string model_prefix;            // a Hugging Face folder, a prefix or a folder; empty: the default model
  std::string state_dir = "var/flotilla";
  std::string db_path;                 // empty: <state_dir>/trajectories.db
  std::string experiment = "default";
  std::string scaffold = "api";
  std::string http_address;            // empty: no HTTP server
  int threads = 0;
};

class EmbeddedWorker {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedWorker>> Start(const EmbeddedWorkerOptions& options);
  ~EmbeddedWorker();

  ChatService& service() { return *service_; }
  TrajectoryStore& store() { return *store_; }
  inference::Engine& engine() { return *engine_; }
  TokenGenerator& generator() { return *generator_; }
  const inference::ModelConfig& config() const { return config_; }
  // The HTTP address actually bound ("127.0.0.1:PORT"), or "" without a server.
  std::string http_address() const { return server_ ? server_->address() : ""; }

 private:
  EmbeddedWorker() = default;
  inference::ModelConfig config_;
  std::unique_ptr<inference::Engine> engine_;
  std::unique_ptr<HfChat> hf_;         // a Hugging Face folder's tokenizer and template
  std::unique_ptr<TokenGenerator> generator_;
  std::unique_ptr<TrajectoryStore> store_;
  std::unique_ptr<ChatService> service_;
  std::unique_ptr<WireApi> api_;
  std::unique_ptr<HttpServer> server_;
};

// Writes a random-init model to PREFIX.{safetensors,json} with the trainer's init script.
absl::Status WriteDefaultModel(const std::string& prefix);

}  // namespace flotilla::worker
