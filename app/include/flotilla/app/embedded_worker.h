// EmbeddedWorker: the worker side of the embedded default: the engine, the one trajectory
// store, and (when it serves a model) a ChatService recording into that store with optionally
// the wire APIs on an HTTP address.
//
// The served model is a Hugging Face model folder (config.json with model_type, safetensors,
// tokenizer.json and tokenizer_config.json: served through its tokenizer and chat template),
// PREFIX.safetensors + PREFIX.json (as the trainer writes them), or a folder with a Flotilla
// config.json and model.safetensors (as `flotilla merge` writes). Without a
// prefix the embedded default model is used: <state_dir>/default-model, written once with
// random weights in C++ (WriteDefaultModel). With serve_model off (an RL run, whose policy the
// trainer publishes) only the engine and the store are started.
//
// Thread-safety: the accessors are thread-safe; Stop() once. Owns everything it starts.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/inference/engine.h"
#include "flotilla/common/http_server.h"
#include "flotilla/dashboard/dashboard.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/hf_chat.h"
#include "flotilla/worker/remote_chat.h"
#include "flotilla/worker/token_generator.h"
#include "flotilla/worker/trajectory_store.h"
#include "flotilla/worker/wire_api.h"

namespace flotilla::app {

struct EmbeddedWorkerOptions {
  // A prefix or a folder; empty: the embedded default model; an http(s):// base URL: an external
  // OpenAI-compatible endpoint (anthropic+http(s)://: Anthropic-compatible) the worker proxies
  // and records as text (worker/remote_chat.h).
  std::string model_prefix;
  std::string endpoint_model;          // the external endpoint's model; empty: its first listed
  // The variable holding the external endpoint's key (unset: none sent); empty: OPENAI_API_KEY,
  // or ANTHROPIC_API_KEY for an anthropic+ URL.
  std::string api_key_env;
  std::string state_dir = "var/flotilla";
  std::string db_path;                 // empty: <state_dir>/trajectories.db
  std::string experiment = "default";
  std::string scaffold = "api";
  // The wire APIs (with serve_model), /metrics and the dashboard share this server; empty: no
  // HTTP server.
  std::string http_address;
  bool serve_model = true;             // false: the engine and the store only
  // engine.metrics, when set, also receives the worker's figures (sessions, turns, tokens, wire
  // API requests).
  inference::EngineOptions engine;
  // What the dashboard shows besides this worker's trajectories (metrics, the run's metrics
  // log, the fleet, eval jobs); its trajectory sources are set by the worker.
  dashboard::DashboardSources dashboard;
};

class EmbeddedWorker {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedWorker>> Start(const EmbeddedWorkerOptions& options);
  ~EmbeddedWorker();

  // service() needs serve_model; generator() too, and a model served by the engine.
  worker::ChatService& service() { return *service_; }
  worker::TrajectoryStore& store() { return *store_; }
  inference::Engine& engine() { return *engine_; }
  worker::TokenGenerator& generator() { return *generator_; }
  const inference::ModelConfig& config() const { return config_; }
  // The HTTP address actually bound ("127.0.0.1:PORT"), or "" without a server.
  std::string http_address() const { return server_ ? server_->address() : ""; }
  // Stops the HTTP server (requests in progress finish).
  void Stop();

 private:
  EmbeddedWorker() = default;
  absl::Status ServeModel(const EmbeddedWorkerOptions& options);
  absl::Status ServeHttp(const EmbeddedWorkerOptions& options);
  inference::ModelConfig config_;
  std::unique_ptr<inference::Engine> engine_;
  std::unique_ptr<worker::HfChat> hf_;  // a Hugging Face folder's tokenizer and template
  std::unique_ptr<worker::TokenGenerator> generator_;
  std::unique_ptr<worker::RemoteChat> remote_;  // with an external endpoint (no generator then)
  std::unique_ptr<worker::TrajectoryStore> store_;
  std::unique_ptr<worker::ChatService> service_;
  std::unique_ptr<worker::WireApi> api_;
  std::unique_ptr<HttpServer> server_;
  bool stopped_ = false;
};

}  // namespace flotilla::app
