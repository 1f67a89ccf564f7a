// flotilla up: every service in one process (the embedded default). Today: the engine with
// the embedded default model and the worker's OpenAI/Anthropic endpoints on --http.
#include <iostream>
#include <memory>

#include "commands.h"
#include "flotilla/worker/embedded_worker.h"
#include "embedded_worker_flags.h"
#include "flotilla/common/shutdown_signals.h"

namespace flotilla::cli {

void AddUpCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<worker::EmbeddedWorkerOptions>();
  opts->http_address = "127.0.0.1:8000";
  CLI::App* up = app.add_subcommand("up", "Run every service in one process (the embedded default)");
  up->add_option("--http", opts->http_address, "HTTP address of the OpenAI/Anthropic APIs (HOST:PORT or unix:PATH)");
  AddEmbeddedWorkerFlags(up, *opts);
  up->callback([opts, exit_code] {
    ShutdownSignals signals;  // before the worker's threads exist, so they inherit the mask
    auto w = worker::EmbeddedWorker::Start(*opts);
    if (!w.ok()) {
      std::cerr << "flotilla up: " << w.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << "flotilla up: serving OpenAI and Anthropic APIs on http://" << (*w)->http_address()
              << "/v1 (model " << (*w)->service().ModelName() << ", trajectories in "
              << (*w)->store().path() << ")" << std::endl;
    signals.Wait();
  });
}

}  // namespace flotilla::cli
