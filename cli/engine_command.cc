// `flotilla engine`: serves the inference engine over gRPC (flotilla.v1.Engine), with the
// engine's Prometheus figures on --metrics-listen, and
// `flotilla bench engine` (bench/engine_bench.h).
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "daemon_metrics.h"
#include "engine_bench.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/engine_service.h"
#include "grpcpp/grpcpp.h"

namespace flotilla::cli {
namespace {

// NAME=config.json:weights.safetensors
bool ParseModelSpec(const std::string& spec, std::string* name, std::string* config, std::string* weights) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  size_t colon = spec.find(':', eq + 1);
  if (colon == std::string::npos) return false;
  *name = spec.substr(0, eq);
  *config = spec.substr(eq + 1, colon - eq - 1);
  *weights = spec.substr(colon + 1);
  return !config->empty() && !weights->empty();
}

int RunEngine(const std::string& listen, const std::vector<std::string>& models,
              const inference::EngineOptions& engine_options, int64_t version, const DaemonMetricsFlags& metrics_flags) {
  ShutdownSignals signals;  // before the engine's and gRPC's threads exist
  MetricsRegistry metrics;  // before the engine, which counts into it
  inference::EngineOptions options = engine_options;
  options.metrics = &metrics;
  auto engine = inference::Engine::Create(options);
  if (!engine.ok()) {
    std::cerr << "flotilla engine: " << engine.status() << "\n";
    return 1;
  }
  for (const std::string& spec : models) {
    std::string name, config_path, weights;
    if (!ParseModelSpec(spec, &name, &config_path, &weights)) {
      std::cerr << "flotilla engine: --model '" << spec << "': want NAME=config.json:weights.safetensors\n";
      return 2;
    }
    std::ifstream f(config_path);
    if (!f) {
      std::cerr << "flotilla engine: --model " << name << ": cannot read " << config_path << "\n";
      return 2;
    }
    std::stringstream text;
    text << f.rdbuf();
    auto config = inference::ModelConfig::FromJson(text.str());
    if (!config.ok()) {
      std::cerr << "flotilla engine: " << config_path << ": " << config.status().message() << "\n";
      return 2;
    }
    if (absl::Status s = (*engine)->LoadModel(name, *config, weights, version); !s.ok()) {
      std::cerr << "flotilla engine: --model " << name << ": " << s.message() << "\n";
      return 2;
    }
  }
  inference::EngineService service(engine->get(), options.backend);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "flotilla engine: cannot listen on " << listen << "\n";
    return 1;
  }
  auto metrics_server = ServeDaemonMetrics("flotilla engine", metrics_flags, metrics);
  if (!metrics_server.ok()) {
    std::cerr << "flotilla engine: " << metrics_server.status().message() << "\n";
    return 2;
  }
  std::cout << "flotilla engine: serving " << models.size() << " model(s) on port " << port << std::endl;
  signals.Wait();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace

void AddEngineCommand(CLI::App& app, int* exit_code) {
  CLI::App* sub = app.add_subcommand("engine", "Run the inference engine daemon (gRPC flotilla.v1.Engine)");
  struct Flags {
    std::string listen = "127.0.0.1:50061";
    std::vector<std::string> models;
    inference::EngineOptions options;
    uint64_t kv_mib = 512;
    int64_t version = 0;
    DaemonMetricsFlags metrics;
  };
  auto flags = std::make_shared<Flags>();
  sub->add_option("--listen", flags->listen, "Address to serve on (host:port; port 0 picks one)");
  sub->add_option("--model", flags->models, "NAME=config.json:weights.safetensors (repeatable; the first is the default)")
      ->required();
  sub->add_option("--backend", flags->options.backend, "cpu or cuda");
  sub->add_option("--threads", flags->options.threads, "CPU threads (0: all)");
  sub->add_option("--kv-mib", flags->kv_mib, "KV cache memory per model, MiB");
  sub->add_option("--max-batch", flags->options.max_batch, "Sequences per step");
  sub->add_option("--state-dir", flags->options.state_dir, "Directory of the file tier for saved states");
  sub->add_option("--policy-version", flags->version, "Policy version of the initial weights");
  AddDaemonMetricsFlags(sub, flags->metrics, "127.0.0.1:50062");
  sub->callback([flags, exit_code] {
    flags->options.kv_memory_bytes = flags->kv_mib << 20;
    *exit_code = RunEngine(flags->listen, flags->models, flags->options, flags->version, flags->metrics);
  });
}

void RegisterEngineBench(CLI::App& bench, int* exit_code) {
  CLI::App* engine = bench.add_subcommand("engine", "Inference engine: CPU vs PyTorch, GPU vs HBM roofline, resume vs re-prefill");
  auto o = std::make_shared<bench::EngineBenchOptions>();
  auto flags = std::make_shared<std::pair<bool, bool>>(false, false);  // cpu-only, gpu-only
  engine->add_flag("--cpu-only", flags->first, "Skip the GPU half");
  engine->add_flag("--gpu-only", flags->second, "Skip the CPU half");
  engine->add_option("--threads", o->cpu_threads, "CPU engine threads (PyTorch uses 2)");
  engine->add_option("--new-tokens", o->new_tokens, "Tokens decoded per sequence");
  engine->add_option("--source-dir", o->source_dir, "Repository root (for the PyTorch script)");
  engine->callback([o, flags, exit_code] {
    o->cpu = !flags->second;
    o->gpu = !flags->first;
    *exit_code = bench::RunEngineBench(*o);
  });
}

}  // namespace flotilla::cli
