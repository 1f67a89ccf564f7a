// `flotilla synth`: validated coding tasks from a source tree with a test suite.
//
//   flotilla synth --repo SRC --out TASKS_DIR [--max-tasks N] [--max-candidates N] [--model DIR]
//                  [--model-endpoint URL [--model-name NAME]] [--model-timeout S] [--model-max-tokens N]
//                  [--model-rewrites N] [--package NAME] [--version V] [--seed S] [--mine-commits N]
//                  [--env-store DIR]
//                  [--difficulty-agent A] [--difficulty-attempts N] [--difficulty-band LO:HI]
//   flotilla synth --difficulty-only --out TASKS_DIR --difficulty-agent A ... (an existing folder)
//   flotilla synth stats --out TASKS_DIR
//
// With --model DIR (a checkpoint folder the engine loads) and no --model-endpoint, the embedded
// worker serves DIR on a loopback port and the model's rewrites and statements go through its
// OpenAI-compatible API; --model-endpoint names an external OpenAI-compatible base URL instead.
// Difficulty (synth/difficulty.h): the policy is --difficulty-agent (oracle, nop, mini,
// terminal), mini by default when --model is given, over the model --model names (served by
// the embedded platform, as `flotilla eval -m` serves it); without either it is not measured.
// --difficulty-only prints the difficulty line to stdout and exits 0 once every task was
// measured or left unknown with its reason (1 when it could not run, 2 for bad arguments).
// Progress lines go to stderr; the summary (the stats) to stdout. A rerun on the same
// TASKS_DIR resumes from its synth.db. Exit status: 0 at least one valid task, 1 none (the
// reasons are printed and kept in TASKS_DIR/REPORT.txt), 2 bad arguments.
#include <filesystem>
#include <functional>
#include <iostream>

#include "absl/strings/str_format.h"

#include "commands.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/eval/job_summary.h"
#include "flotilla/synth/difficulty.h"
#include "flotilla/synth/synthesizer.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

struct SynthFlags {
  synth::SynthOptions options;
  std::string env_store = "/var/lib/flotilla";
  std::string band;
  bool difficulty_only = false;
};

int Synthesize(SynthFlags& f) {
  if ((f.options.repo.empty() && !f.difficulty_only) || f.options.out.empty()) {
    std::cerr << "flotilla synth: --repo and --out are required (--difficulty-only: --out)\n";
    return 2;
  }
  synth::DifficultyOptions& d = f.options.difficulty;
  if (d.agent.empty() && !f.options.model.empty()) d.agent = "mini";
  if (!f.band.empty()) {
    auto band = synth::ParseDifficultyBand(f.band);
    if (!band.ok()) {
      std::cerr << "flotilla synth: " << band.status().message() << "\n";
      return 2;
    }
    d.band = *band;
  }
  if (absl::Status checked = synth::CheckDifficultyOptions(d); !checked.ok()) {
    std::cerr << "flotilla synth: " << checked.message() << "\n";
    return 2;
  }
  const bool difficulty = !d.agent.empty() && d.attempts > 0;
  if (f.difficulty_only && !difficulty) {
    std::cerr << "flotilla synth: --difficulty-only needs --difficulty-agent (or --model) and --difficulty-attempts >= 1\n";
    return 2;
  }
  f.options.builder = CliEnvBuilderOptions(f.env_store);
  // The suites and probes run in sandboxes placed by the embedded platform's scheduler and
  // reached through the NodeAgent API, like eval's trials. A model is served only for the model
  // stages below and the difficulty stage's policy (the embedded default for oracle and nop,
  // which use none).
  app::PlatformOptions po;
  // The model writes rewrites and statements through the worker's wire API on a loopback port
  // (unless an external endpoint is named); the difficulty stage's policy runs on it too.
  const bool serve_rewrites = !f.options.model.empty() && f.options.model_endpoint.empty();
  po.worker.serve_model = difficulty || serve_rewrites;
  po.worker.model_prefix = f.options.model;
  po.worker.experiment = "synth";
  po.worker.state_dir = (std::filesystem::absolute(f.options.out) / ".work" / "platform").string();
  if (serve_rewrites) po.worker.http_address = "127.0.0.1:0";
  if (!serve_rewrites && (!difficulty || !eval::AgentUsesModel(d.agent))) po.worker.engine.threads = 1;
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
  if (serve_rewrites) {
    f.options.model_endpoint = "http://" + (*platform)->worker().http_address() + "/v1";
    f.options.model_name = (*platform)->worker().service().ModelName();
  }
  if (difficulty) {
    d.policy = &(*platform)->worker().service();
    d.store = &(*platform)->worker().store();
  }
  if (f.difficulty_only) {
    auto m = synth::MeasureFolderDifficulty(d, f.options.out, f.options.builder, *f.options.sandboxes,
                                            [](std::string_view l) { std::cerr << l << std::flush; });
    if (!m.ok()) {
      std::cerr << "flotilla synth: " << m.status().message() << "\n";
      return m.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    std::cout << m->report;
    return 0;
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
  synth::DifficultyOptions& d = f->options.difficulty;
  sy->add_option("--difficulty-agent", d.agent,
                 "policy whose solve rate is the difficulty: oracle, nop, mini or terminal (default with --model: "
                 "mini; none: not measured)");
  sy->add_option("--difficulty-attempts", d.attempts, "attempts per task (0: not measured)")->capture_default_str();
  sy->add_option("--difficulty-band", f->band, "keep tasks whose solve rate is in LO:HI; the rest go to OUT/excluded/");
  sy->add_option("--difficulty-concurrency", d.concurrency, "difficulty trials at once")->capture_default_str();
  sy->add_option("--difficulty-max-steps", d.scaffold.max_steps, "agent turns per attempt")->capture_default_str();
  sy->add_option("--difficulty-max-tokens", d.scaffold.max_tokens, "tokens per model turn")->capture_default_str();
  sy->add_option("--difficulty-temperature", d.scaffold.temperature, "sampling temperature")->capture_default_str();
  sy->add_flag("--difficulty-only", f->difficulty_only,
               "measure (and band) the task folders already in --out; no --repo, nothing synthesized");
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
