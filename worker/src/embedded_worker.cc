#include "flotilla/worker/embedded_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker {
namespace {

namespace fs = std::filesystem;

std::string FindTrainerPython() {
  std::vector<fs::path> roots;
  if (const char* s = std::getenv("FLOTILLA_SOURCE_DIR")) roots.emplace_back(s);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      roots.push_back(p);
    }
  }
  roots.push_back(fs::current_path(ec));
  for (const fs::path& r : roots) {
    fs::path candidate = r / "trainer_bridge" / "python";
    if (fs::exists(candidate / "flotilla_trainer" / "init_model.py")) return candidate.string();
  }
  return "";
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("model config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

}  // namespace

absl::Status WriteDefaultModel(const std::string& prefix) {
  std::string py = FindTrainerPython();
  if (py.empty()) {
    return absl::NotFoundError(
        "embedded default model: trainer_bridge/python not found (set FLOTILLA_SOURCE_DIR or "
        "pass --model PREFIX)");
  }
  std::error_code ec;
  fs::create_directories(fs::path(prefix).parent_path(), ec);
  std::string cmd = absl::StrCat("PYTHONPATH='", py, "' /usr/bin/python3 -m flotilla_trainer.init_model --out '",
                                 prefix, "' --seed 0 >&2");
  int rc = std::system(cmd.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("embedded default model: init_model exited ", rc));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EmbeddedWorker>> EmbeddedWorker::Start(const EmbeddedWorkerOptions& o) {
  std::unique_ptr<EmbeddedWorker> w(new EmbeddedWorker());
  std::error_code ec;
  fs::create_directories(o.state_dir, ec);
  inference::EngineOptions eo;
  eo.threads = o.threads;
  ASSIGN_OR_RETURN(w->engine_, inference::Engine::Create(eo));
  std::string prefix = o.model_prefix;
  if (!prefix.empty() && IsHfFolder(prefix)) {
    // A Hugging Face model folder: config.json + safetensors + tokenizer files.
    RETURN_IF_ERROR(w->engine_->LoadHfModel("default", prefix, 0));
    ASSIGN_OR_RETURN(w->config_, w->engine_->Config("default"));
    ASSIGN_OR_RETURN(w->hf_, HfChat::Load(prefix));
    std::string name = fs::path(prefix).lexically_normal().filename().string();
    if (name.empty()) name = fs::path(prefix).lexically_normal().parent_path().filename().string();
    w->generator_ = NewEngineTokenGenerator(w->engine_.get(), "default", name);
  } else {
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
    const std::string weights_path =
        folder ? (fs::path(prefix) / "model.safetensors").string() : prefix + ".safetensors";
    ASSIGN_OR_RETURN(std::string config_text, ReadText(config_path));
    ASSIGN_OR_RETURN(w->config_, inference::ModelConfig::FromJson(config_text));
    RETURN_IF_ERROR(w->engine_->LoadModel("default", w->config_, weights_path, 0));
    w->generator_ = NewEngineTokenGenerator(w->engine_.get(), "default", "flotilla-default");
  }
  std::string db = o.db_path.empty() ? (fs::path(o.state_dir) / "trajectories.db").string() : o.db_path;
  ASSIGN_OR_RETURN(w->store_, TrajectoryStore::Open(db));
  ChatServiceOptions so;
  so.store = w->store_.get();
  so.experiment = o.experiment;
  so.scaffold = o.scaffold;
  so.experts_per_token = w->config_.routing_width();
  so.hf = w->hf_.get();
  w->service_ = std::make_unique<ChatService>(w->generator_.get(), so);
  if (!o.http_address.empty()) {
    w->api_ = std::make_unique<WireApi>(w->service_.get());
    ASSIGN_OR_RETURN(w->server_, ServeWireApi(o.http_address, w->api_.get()));
  }
  return w;
}

EmbeddedWorker::~EmbeddedWorker() {
  if (server_) server_->Stop();
  server_.reset();
  service_.reset();
}

}  // namespace flotilla::worker
