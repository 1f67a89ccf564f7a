#include "flotilla/app/embedded_worker.h"

#include "flotilla/inference/tokenizer.h"
#include "nlohmann/json.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/app/default_model.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::app {
namespace {

namespace fs = std::filesystem;

// A Hugging Face checkpoint folder: its config.json names a model_type (Flotilla's own
// config.json, as `flotilla merge` writes it, does not).
bool IsHfFolder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  std::ifstream in(fs::path(dir) / "config.json");
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("model_type");
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("model config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedWorker>> EmbeddedWorker::Start(const EmbeddedWorkerOptions& o) {
  std::unique_ptr<EmbeddedWorker> w(new EmbeddedWorker());
  std::error_code ec;
  fs::create_directories(o.state_dir, ec);
  ASSIGN_OR_RETURN(w->engine_, inference::Engine::Create(o.engine));
  std::string db = o.db_path.empty() ? (fs::path(o.state_dir) / "trajectories.db").string() : o.db_path;
  ASSIGN_OR_RETURN(w->store_, worker::TrajectoryStore::Open(db));
  if (o.serve_model) RETURN_IF_ERROR(w->ServeModel(o));
  if (!o.http_address.empty()) RETURN_IF_ERROR(w->ServeHttp(o));
  return w;
}

absl::Status EmbeddedWorker::ServeModel(const EmbeddedWorkerOptions& o) {
  std::string prefix = o.model_prefix;
  std::string served_name = "flotilla-default";
  if (worker::IsEndpointUrl(prefix)) {
    worker::RemoteChatOptions ro;
    ro.base_url = prefix;
    ro.model = o.endpoint_model;
    const std::string key_env = !o.api_key_env.empty()                  ? o.api_key_env
                                : absl::StartsWith(prefix, "anthropic+") ? "ANTHROPIC_API_KEY"
                                                                          : "OPENAI_API_KEY";
    if (const char* key = std::getenv(key_env.c_str()); key != nullptr) ro.api_key = key;
    auto remote = worker::RemoteChat::Create(ro);
    if (!remote.ok()) return Annotate(remote.status(), absl::StrCat("-m ", prefix));
    remote_ = std::move(*remote);
    worker::ChatServiceOptions so;
    so.store = store_.get();
    so.experiment = o.experiment;
    so.scaffold = o.scaffold;
    so.remote = remote_.get();
    service_ = std::make_unique<worker::ChatService>(nullptr, so);
    api_ = std::make_unique<worker::WireApi>(service_.get());
    FLOG(info, "proxying an external endpoint (trajectories recorded as text)",
         {{"endpoint", prefix}, {"model", remote_->model()}});
    return absl::OkStatus();
  }
  if (!prefix.empty() && IsHfFolder(prefix)) {
    // A Hugging Face model folder: config.json + safetensors + tokenizer files.
    RETURN_IF_ERROR(engine_->LoadHfModel("default", prefix, 0));
    ASSIGN_OR_RETURN(config_, engine_->Config("default"));
    ASSIGN_OR_RETURN(hf_, worker::HfChat::Load(prefix));
    served_name = fs::path(prefix).lexically_normal().filename().string();
    if (served_name.empty()) served_name = fs::path(prefix).lexically_normal().parent_path().filename().string();
  } else {
    if (prefix.empty()) {
      prefix = (fs::path(o.state_dir) / "default-model").string();
      if (!fs::exists(prefix + ".safetensors") || !fs::exists(prefix + ".json")) {
        FLOG(info, "writing the embedded default model", {{"prefix", prefix}});
        RETURN_IF_ERROR(WriteDefaultModel(prefix));
      }
    }
    // A model folder (config.json + model.safetensors, as `flotilla merge` writes) or a prefix.
    std::error_code ec;
    const bool folder = fs::is_directory(prefix, ec);
    const std::string config_path = folder ? (fs::path(prefix) / "config.json").string() : prefix + ".json";
    const std::string weights_path = folder ? (fs::path(prefix) / "model.safetensors").string() : prefix + ".safetensors";
    ASSIGN_OR_RETURN(std::string config_text, ReadText(config_path));
    ASSIGN_OR_RETURN(config_, inference::ModelConfig::FromJson(config_text));
    RETURN_IF_ERROR(engine_->LoadModel("default", config_, weights_path, 0));
  }
  generator_ = worker::NewEngineTokenGenerator(engine_.get(), "default", served_name);
  worker::ChatServiceOptions so;
  so.store = store_.get();
  so.experiment = o.experiment;
  so.scaffold = o.scaffold;
  so.experts_per_token = config_.routing_width();
  so.metrics = o.engine.metrics;
  so.hf = hf_.get();
  service_ = std::make_unique<worker::ChatService>(generator_.get(), so);
  api_ = std::make_unique<worker::WireApi>(service_.get());
  return absl::OkStatus();
}

absl::Status EmbeddedWorker::ServeHttp(const EmbeddedWorkerOptions& o) {
  dashboard::DashboardSources sources = o.dashboard;
  worker::TrajectoryStore* store = store_.get();
  sources.recent_trajectories = [store](int limit) { return store->Newest({}, limit); };
  sources.trajectory = [store](const std::string& id) { return store->Get(id); };
  // Token text for the trajectory viewer: the served folder's tokenizer, else the byte model's.
  if (!sources.token_text && hf_ != nullptr) {
    sources.token_text = [hf = hf_.get()](int32_t id) { return hf->tokenizer().Decode({id}); };
  }
  if (!sources.token_text) sources.token_text = [](int32_t id) { return inference::Decode({id}); };
  HttpHandler wire;
  if (api_ != nullptr) wire = [api = api_.get()](const HttpRequest& r, HttpResponder& out) { api->Handle(r, out); };
  HttpHandler handler = dashboard::DashboardHandler(std::move(sources), std::move(wire));
  // Every request of the server (wire APIs, /metrics, the dashboard) by route and status.
  if (o.engine.metrics != nullptr) handler = worker::CountRequests(std::move(handler), *o.engine.metrics);
  ASSIGN_OR_RETURN(server_, HttpServer::Start(o.http_address, std::move(handler)));
  return absl::OkStatus();
}

void EmbeddedWorker::Stop() {
  if (server_ && !stopped_) server_->Stop();
  stopped_ = true;
}

EmbeddedWorker::~EmbeddedWorker() {
  Stop();
  server_.reset();
  service_.reset();
}

}  // namespace flotilla::app
