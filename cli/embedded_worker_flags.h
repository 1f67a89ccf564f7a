// Flags shared by `flotilla up` and `flotilla worker`: which model to serve and where the
// stores live. Both subcommands start the same embedded worker.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "flotilla/app/embedded_worker.h"

namespace flotilla::cli {

inline constexpr const char* kModelFlagHelp =
    "a Hugging Face model folder (config.json with model_type, safetensors, tokenizer files), "
    "a model PREFIX (.safetensors + .json) or folder (config.json + model.safetensors, e.g. a "
    "merge), or an external endpoint's base URL: OpenAI-compatible http(s)://HOST[:PORT]/v1 or "
    "Anthropic-compatible anthropic+http(s)://HOST[:PORT]/v1 (proxied, trajectories recorded as text); "
    "default: the embedded default model";

// `models`: where -m goes when the subcommand takes it several times (flotilla eval); null: one
// model, into opts.model_prefix.
inline void AddEmbeddedWorkerFlags(CLI::App* sub, app::EmbeddedWorkerOptions& opts,
                                   std::vector<std::string>* models = nullptr) {
  if (models != nullptr) {
    sub->add_option("-m,--model", *models,
                    std::string(kModelFlagHelp) + "; repeatable: each model's trials side by side (URL#NAME: "
                                                  "the endpoint's model NAME)");
  } else {
    sub->add_option("-m,--model", opts.model_prefix, kModelFlagHelp);
  }
  sub->add_option("--endpoint-model", opts.endpoint_model,
                  "with -m http(s)://.../v1 (an external OpenAI-compatible endpoint): its model name "
                  "(default: the first one GET /models lists)");
  sub->add_option("--api-key-env", opts.api_key_env,
                  "with -m http(s)://...: the environment variable holding the endpoint's API key (default: "
                  "OPENAI_API_KEY; ANTHROPIC_API_KEY for anthropic+http(s)://...)");
  sub->add_option("--state-dir", opts.state_dir, "where the default model and stores live");
  sub->add_option("--db", opts.db_path, "trajectory store (SQLite); default: <state-dir>/trajectories.db");
  sub->add_option("--experiment", opts.experiment, "experiment name written into trajectories");
  sub->add_option("--threads", opts.engine.threads, "engine CPU threads (0: all)");
}

}  // namespace flotilla::cli
