#include "flotilla/app/embedded_worker.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/app/default_model.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::app {
namespace {

namespace fs = std::filesystem;

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
  if (!o.serve_model) return w;
  std::string prefix = o.model_prefix;
  if (prefix.empty()) {
    prefix = (fs::path(o.state_dir) / "default-model").string();
    if (!fs::exists(prefix + ".safetensors") || !fs::exists(prefix + ".json")) {
      FLOG(info, "writing the embedded default model", {{"prefix", prefix}});
      RETURN_IF_ERROR(WriteDefaultModel(prefix));
    }
  }
  // A model folder (config.json + model.safetensors, as `flotilla merge` writes) or a prefix.
  const bool folder = fs::is_directory(prefix, ec);
  const std::string config_path = folder ? (fs::path(prefix) / "config.json").string() : prefix + ".json";
  const std::string weights_path = folder ? (fs::path(prefix) / "model.safetensors").string() : prefix + ".safetensors";
  ASSIGN_OR_RETURN(std::string config_text, ReadText(config_path));
  ASSIGN_OR_RETURN(w->config_, inference::ModelConfig::FromJson(config_text));
  RETURN_IF_ERROR(w->engine_->LoadModel("default", w->config_, weights_path, 0));
  w->generator_ = worker::NewEngineTokenGenerator(w->engine_.get(), "default", "flotilla-default");
  worker::ChatServiceOptions so;
  so.store = w->store_.get();
  so.experiment = o.experiment;
  so.scaffold = o.scaffold;
  so.experts_per_token = w->config_.routing_width();
  w->service_ = std::make_unique<worker::ChatService>(w->generator_.get(), so);
  if (!o.http_address.empty()) {
    w->api_ = std::make_unique<worker::WireApi>(w->service_.get());
    ASSIGN_OR_RETURN(w->server_, worker::ServeWireApi(o.http_address, w->api_.get()));
  }
  return w;
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
