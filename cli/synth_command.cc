// `flotilla synth`: validated coding tasks from a source tree with a test suite.
//
//   flotilla synth --repo SRC --out TASKS_DIR [--max-tasks N] [--max-candidates N] [--model DIR]
//                  [--model-endpoint URL [--model-name NAME]] [--model-timeout S] [--model-max-tokens N]
//                  [--model-rewrites N] [--package NAME] [--version V] [--seed S] [--mine-commits N]
//                  [--env-store DIR]
//   flotilla synth stats --out TASKS_DIR
//
// With --model DIR (a checkpoint folder the engine loads) and no --model-endpoint, the embedded
// worker serves DIR on a loopback port and the model's rewrites and statements go through its
// OpenAI-compatible API; --model-endpoint names an external OpenAI-compatible base URL instead.
// Progress lines go to stderr; the summary (the stats) to stdout. A rerun on the same
// TASKS_DIR resumes from its synth.db. Exit status: 0 at least one valid task, 1 none (the
// reasons are printed and kept in TASKS_DIR/REPORT.txt), 2 bad arguments.
#include <filesystem>
#include <functional>
#include <iostream>

#include "absl/strings/str_format.h"

#include "commands.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/synth/synthesizer.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

struct SynthFlags {
  synth::SynthOptions options;
  std::string env_store = "/var/lib/flotilla";
};

int Synthesize(SynthFlags& f) {
  if (f.options.repo.empty() || f.options.out.empty()) {
    std::cerr << "flotilla synth: --repo and --out are required\n";
    return 2;
  }
  f.options.builder = CliEnvBuilderOptions(f.env_store);
  // The suites and probes run in sandboxes placed by the embedded platform's scheduler and
  // reached through the NodeAgent API, like eval's trials (no model is served).
  app::PlatformOptions po;
  po.worker.serve_model = false;
  po.worker.state_dir = (std::filesystem::path(f.options.out) / ".work" / "platform").string();
  po.worker.engine.threads = 1;
  if (!f.options.model.empty() && f.options.model_endpoint.empty()) {
    // The model writes rewrites and statements through the worker's wire API on a loopback port.
    po.worker.serve_model = true;
    po.worker.model_prefix = f.options.model;
    po.worker.http_address = "127.0.0.1:0";
    po.worker.engine.threads = 0;
  }
  // One sandbox state folder per output folder: the platform clears leftovers in its folder on
  // start, so two syntheses (into different folders) running at once must not share one.
  const std::string out_abs = std::filesystem::absolute(f.options.out).lexically_normal().string();
  po.sandbox_state_dir =
      absl::StrFormat("%s/synth-sandboxes/%016x", f.env_store, std::hash<std::string>{}(out_abs));
  po.image_dir = f.env_store;
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "flotilla synth: " << platform.status().message() << "\n";
    return 1;
  }
  f.options.sandboxes = &(*platform)->sandboxes();
  if (po.worker.serve_model) {
    f.options.model_endpoint = "http://" + (*platform)->worker().http_address() + "/v1";
    f.options.model_name = (*platform)->worker().service().ModelName();
  }
  auto s = synth::RunSynth(f.options, [](std::string_view l) { std::cerr << l << std::flush; });
  if (!s.ok()) {
    std::cerr << "flotilla synth: " << s.status().message() << "\n";
    return s.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << s->report;
  return 0;
}

}  // namespace

void AddSynthCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* sy = app.add_subcommand("synth", "Synthesize validated coding tasks from a source tree");
  sy->require_subcommand(0, 1);
  sy->add_option("--repo", f->options.repo, "source tree with a test suite (Python/pytest, C/make check)");
  sy->add_option("--out", f->options.out, "folder of the task folders and synth.db");
  sy->add_option("--max-tasks", f->options.max_tasks, "stop after this many valid tasks")->capture_default_str();
  sy->add_option("--max-candidates", f->options.max_candidates, "validation attempts at most")->capture_default_str();
  sy->add_option("--model", f->options.model,
                 "model for statements, rewrites and difficulty: a checkpoint folder the embedded worker serves "
                 "(none: deterministic statements, no rewrites)");
  sy->add_option("--model-endpoint", f->options.model_endpoint,
                 "an external OpenAI-compatible base URL (http(s)://HOST:PORT/v1; anthropic+http(s)://... for the "
                 "Messages API) for rewrites and statements instead of serving --model");
  sy->add_option("--model-name", f->options.model_name, "with --model-endpoint: its model (default: the first listed)");
  sy->add_option_function<double>(
        "--model-timeout", [f](double s) { f->options.model_timeout_ms = static_cast<uint32_t>(s * 1000); },
        "seconds per model request (1 to 600; default 120)");
  sy->add_option("--model-max-tokens", f->options.model_max_tokens, "tokens per model reply (16 to 8192)")
      ->capture_default_str();
  sy->add_option("--model-rewrites", f->options.model_rewrites, "functions the model is asked to rewrite, at most")
      ->capture_default_str();
  sy->add_option("--package", f->options.package, "provenance: source package (default: debian/changelog's)");
  sy->add_option("--version", f->options.version, "provenance: its version (default: debian/changelog's)");
  sy->add_option("--seed", f->options.seed, "order in which mutations are tried")->capture_default_str();
  sy->add_option("--mine-commits", f->options.mine_commits,
                 "newest git commits mined for fixes with tests (0: none)")->capture_default_str();
  sy->add_option("--env-store", f->env_store, "where environments are built (flotilla env)")->capture_default_str();
  CLI::App* stats = sy->add_subcommand("stats", "Yield per stage and seconds per valid task");
  auto stats_out = std::make_shared<std::string>();
  stats->add_option("--out", *stats_out, "the synth output folder")->required();
  stats->callback([stats_out, exit_code] {
    auto s = synth::SynthStats(*stats_out);
    if (!s.ok()) {
      std::cerr << "flotilla synth stats: " << s.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << *s;
    *exit_code = 0;
  });
  sy->callback([f, sy, stats, exit_code] {
    if (stats->parsed()) return;
    (void)sy;
    *exit_code = Synthesize(*f);
  });
}

}  // namespace flotilla::cli
