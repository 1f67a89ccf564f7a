// An RL experiment, as declared in its YAML file.
//
//   ASSIGN_OR_RETURN(ExperimentConfig cfg, LoadExperimentConfig("examples/arith-grpo/experiment.yaml"));
//
// Every error names the file, the line and the field ("exp.yaml:12: datasets[1].weight: must be
// > 0"). Relative paths inside the file are resolved against the file's directory. Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::trainer_bridge {

// One task source in the mixture.
struct DatasetConfig {
  std::string name;
  std::string source;          // "builtin:<family>[?k=v&...]", a JSONL file of tasks, or a task folder
  std::string domain;          // teacher mapping key; defaults to the name
  double weight = 1.0;         // mixture weight (relative)
  uint32_t max_in_flight = 0;  // per-dataset sample concurrency; 0: only the global bound
};

struct LengthBiasConfig {
  bool enabled = true;
  double strength = 1.0;       // 0: off; 1: hold a short sample until a median one would finish
  int64_t max_hold_ms = 2000;  // never hold longer than this
  uint32_t warmup_samples = 16;  // completed samples per dataset before holding starts
};

struct EffortConfig {
  std::vector<uint32_t> levels;  // empty: no effort control; each in 1..100
  double k0 = 0.0;               // length-penalty scale at b_min
  double tau = 25.0;             // decay of k(b) with effort
  double c_max = 1.0;            // cap of the penalty
  double l_norm = 256.0;         // length normaliser (tokens)
};

struct TeacherConfig {
  std::string name;
  std::string model_config;      // JSON file (ModelConfig)
  std::string weights;           // safetensors file
  std::vector<std::string> domains;  // datasets or domains it scores
  uint32_t top_k = 0;            // 0 with full_vocab: every logprob
  bool full_vocab = true;
  bool active = true;
};

struct TrainerConfig {
  std::string address = "127.0.0.1:0";  // where the TrainerBridge service listens
  std::vector<std::string> command;     // the trainer process `flotilla run` starts; empty: none
  uint32_t sft_steps = 0;               // warm-start steps before RL
  uint32_t rl_steps = 100;
  uint32_t publish_every = 1;           // PublishWeights every N optimizer steps
  double learning_rate = 1e-3;
  double sft_learning_rate = 3e-3;
  double clip_eps = 0.2;
  // GRPO: each trainer step makes ppo_epochs x minibatches optimizer updates on its batch (the
  // samples split `minibatches` ways, the whole batch passed `ppo_epochs` times), clipping
  // pi_theta / pi_prox where pi_prox is the policy before the step's first update. 1 x 1: one
  // update, ratio 1, no clipping. minibatches is at most the samples in a batch.
  uint32_t ppo_epochs = 1;
  uint32_t minibatches = 1;
  // GRPO: weight of the KL(pi_theta || pi_ref) penalty added to the loss, pi_ref being the warm
  // start (the policy published as version 0); 0: none.
  double kl_coef = 0.0;
  std::string loss = "grpo";            // "grpo" or "opd"
  std::string lr_schedule = "constant";  // RL learning rate: "constant", "linear" (decay to 10%) or
                                         // "warmup-linear" (a rise over the first 10% of rl_steps, then the decay)
  uint32_t teacher_steps = 300;         // OPD: SFT steps per teacher and sub-domain when untrained
  int64_t time_limit_ms = 0;            // stop RL after this long; 0: none
};

struct RolloutConfig {
  uint32_t group_size = 8;
  uint32_t groups_per_step = 8;      // prompts per training batch
  uint32_t max_in_flight = 64;       // samples in flight, all datasets together
  uint32_t staleness = 4;            // eta: how many versions a token may lag the trainer
  uint32_t max_new_tokens = 64;      // per model turn
  float temperature = 1.0f;
  bool std_scaling = true;           // divide group-centred rewards by the group's std
  bool synchronous = false;          // batch rollout: every group of a step before an update
  double failure_reward = 0;         // reward of a sample whose sandbox failed (kept, trained on)
  uint32_t max_turns = 20;           // model turns per sample (mini, terminal)
  LengthBiasConfig length_bias;
};

struct PolicyConfig {
  std::string model_config;     // JSON file (ModelConfig); empty: the inline model below
  std::string model_json;       // inline ModelConfig JSON
  std::string init = "random";  // "random", a safetensors file, or "merge:CONFIG.yaml" (merged first)
  uint64_t seed = 1;
};

struct ExperimentConfig {
  std::string name;
  std::string file;             // where it was loaded from
  std::string state_dir;        // SQLite store, checkpoints
  // "single-turn", "mini", "terminal", or an agent CLI run in the sample's sandbox ("pi":
  // folder datasets only, their tasks built with the CLI on top; see IsAgentCliScaffold).
  std::string scaffold = "single-turn";
  std::string sandbox_policy = "default";
  std::string system_prompt;
  // mini, terminal: replace the scaffold's own system text / first user turn ("{{task}}" is the
  // instruction); empty: the scaffold's own (worker::ScaffoldOptions).
  std::string system_template;
  std::string instance_template;
  uint64_t seed = 1;
  PolicyConfig policy;
  std::vector<DatasetConfig> datasets;
  RolloutConfig rollout;
  EffortConfig effort;
  std::vector<TeacherConfig> teachers;
  TrainerConfig trainer;
};

absl::StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path);
// Whether `scaffold` is an agent CLI (pi) rather than one of the worker's built-in scaffolds.
bool IsAgentCliScaffold(const std::string& scaffold);
// Parses YAML text; `name` stands for the file in errors, `base_dir` resolves relative paths.
absl::StatusOr<ExperimentConfig> ParseExperimentConfig(const std::string& text, const std::string& name,
                                                       const std::string& base_dir);

}  // namespace flotilla::trainer_bridge
