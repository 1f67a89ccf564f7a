// flotilla up: every service in one process (the embedded default): the scheduler with the
// in-process node agent registered, the engine (and its gRPC service) with the embedded
// default model, the worker's OpenAI/Anthropic endpoints on --http and, with --experiment-file, the
// experiment's trainer bridge. Prints one line per service it started.
#include <iostream>
#include <memory>

#include "commands.h"
#include "embedded_worker_flags.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/trainer_bridge/experiment_config.h"

namespace flotilla::cli {

void AddUpCommand(CLI::App& app, int* exit_code) {
  struct UpFlags {
    app::PlatformOptions platform;
    std::string experiment;
  };
  auto f = std::make_shared<UpFlags>();
  f->platform.worker.http_address = "127.0.0.1:8000";
  f->platform.engine_listen = "127.0.0.1:0";
  CLI::App* up = app.add_subcommand("up", "Run every service in one process (the embedded default)");
  up->add_option("--http", f->platform.worker.http_address,
                 "HTTP address of the OpenAI/Anthropic APIs (HOST:PORT or unix:PATH)");
  up->add_option("--scheduler-listen", f->platform.scheduler_listen, "Scheduler gRPC address (port 0: any)");
  up->add_option("--node-listen", f->platform.node_listen, "NodeAgent gRPC address (port 0: any)");
  up->add_option("--engine-listen", f->platform.engine_listen, "Engine gRPC address (port 0: any)");
  up->add_option("--experiment-file", f->experiment, "experiment YAML: also start its trainer bridge");
  AddEmbeddedWorkerFlags(up, f->platform.worker);
  up->callback([f, exit_code] {
    app::PlatformOptions o = f->platform;
    std::optional<trainer_bridge::ExperimentConfig> cfg;
    if (!f->experiment.empty()) {
      auto loaded = trainer_bridge::LoadExperimentConfig(f->experiment);
      if (!loaded.ok()) {
        std::cerr << "flotilla up: " << loaded.status().message() << "\n";
        *exit_code = 2;
        return;
      }
      cfg = std::move(*loaded);
      o.experiment = &*cfg;
    }
    ShutdownSignals signals;  // before any service starts a thread, so every thread inherits the mask
    auto p = app::EmbeddedPlatform::Start(o);
    if (!p.ok()) {
      std::cerr << "flotilla up: " << p.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    for (const app::ServiceEndpoint& s : (*p)->Services()) {
      std::cout << "flotilla up: " << s.name << " on " << s.address << "\n";
    }
    if (!cfg.has_value()) std::cout << "flotilla up: trainer bridge not started (no --experiment-file)\n";
    std::cout << "flotilla up: serving OpenAI and Anthropic APIs on http://" << (*p)->worker().http_address()
              << "/v1 (model " << (*p)->worker().service().ModelName() << ", trajectories in "
              << (*p)->worker().store().path() << ")" << std::endl;
    signals.Wait();
    (*p)->Stop();
  });
}

}  // namespace flotilla::cli
