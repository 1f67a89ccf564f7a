#include "flotilla/trainer_bridge/experiment_config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "flotilla/common/config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"

namespace flotilla::trainer_bridge {
namespace {

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute() || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

absl::StatusOr<uint32_t> AsCount(const ConfigNode& n, int64_t dflt, int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(int64_t v, n.AsInt(dflt));
  if (v < min || v > max) return n.Error(absl::StrCat("must be in ", min, "..", max, ", got ", v));
  return static_cast<uint32_t>(v);
}

absl::Status ParseDatasets(const ConfigNode& node, ExperimentConfig* cfg) {
  ASSIGN_OR_RETURN(auto items, node.Items());
  if (items.empty()) return node.Error("at least one dataset is required");
  std::set<std::string> names;
  for (const ConfigNode& d : items) {
    RETURN_IF_ERROR(d.CheckKeys({"name", "source", "domain", "weight", "max_in_flight"}));
    DatasetConfig ds;
    ASSIGN_OR_RETURN(ds.name, d["name"].AsString());
    if (ds.name.empty()) return d["name"].Error("must not be empty");
    if (!names.insert(ds.name).second) return d["name"].Error("duplicate dataset '" + ds.name + "'");
    ASSIGN_OR_RETURN(ds.source, d["source"].AsString());
    ASSIGN_OR_RETURN(ds.domain, d["domain"].AsString(ds.name));
    ASSIGN_OR_RETURN(ds.weight, d["weight"].AsDouble(1.0));
    if (!(ds.weight > 0)) return d["weight"].Error("must be > 0");
    ASSIGN_OR_RETURN(ds.max_in_flight, AsCount(d["max_in_flight"], 0, 0, 1 << 20));
    cfg->datasets.push_back(std::move(ds));
  }
  return absl::OkStatus();
}

absl::Status ParseRollout(const ConfigNode& n, RolloutConfig* r) {
  RETURN_IF_ERROR(n.CheckKeys({"group_size", "groups_per_step", "max_in_flight", "staleness",
                               "max_new_tokens", "temperature", "std_scaling", "synchronous",
                               "length_bias", "failure_reward", "max_turns"}));
  ASSIGN_OR_RETURN(r->group_size, AsCount(n["group_size"], 8, 1, 1024));
  ASSIGN_OR_RETURN(r->groups_per_step, AsCount(n["groups_per_step"], 8, 1, 1 << 16));
  ASSIGN_OR_RETURN(r->max_in_flight, AsCount(n["max_in_flight"], 64, 1, 1 << 20));
  if (r->max_in_flight < r->group_size) {
    return n["max_in_flight"].Error(absl::StrCat("must be >= group_size (", r->group_size, ")"));
  }
  ASSIGN_OR_RETURN(r->staleness, AsCount(n["staleness"], 4, 0, 1 << 16));
  ASSIGN_OR_RETURN(r->max_new_tokens, AsCount(n["max_new_tokens"], 64, 1, 1 << 20));
  ASSIGN_OR_RETURN(double t, n["temperature"].AsDouble(1.0));
  if (t < 0) return n["temperature"].Error("must be >= 0");
  r->temperature = static_cast<float>(t);
  ASSIGN_OR_RETURN(r->std_scaling, n["std_scaling"].AsBool(true));
  ASSIGN_OR_RETURN(r->synchronous, n["synchronous"].AsBool(false));
  ASSIGN_OR_RETURN(r->failure_reward, n["failure_reward"].AsDouble(0.0));
  ASSIGN_OR_RETURN(r->max_turns, AsCount(n["max_turns"], 20, 1, 10'000));
  ConfigNode lb = n["length_bias"];
  RETURN_IF_ERROR(lb.CheckKeys({"enabled", "strength", "max_hold", "warmup_samples"}));
  ASSIGN_OR_RETURN(r->length_bias.enabled, lb["enabled"].AsBool(true));
  ASSIGN_OR_RETURN(r->length_bias.strength, lb["strength"].AsDouble(1.0));
  if (r->length_bias.strength < 0) return lb["strength"].Error("must be >= 0");
  ASSIGN_OR_RETURN(r->length_bias.max_hold_ms, lb["max_hold"].AsDurationMs(2000));
  ASSIGN_OR_RETURN(r->length_bias.warmup_samples, AsCount(lb["warmup_samples"], 16, 0, 1 << 20));
  return absl::OkStatus();
}

absl::Status ParseEffort(const ConfigNode& n, EffortConfig* e) {
  RETURN_IF_ERROR(n.CheckKeys({"levels", "k0", "tau", "c_max", "l_norm"}));
  ASSIGN_OR_RETURN(auto levels, n["levels"].Items());
  for (const ConfigNode& l : levels) {
    ASSIGN_OR_RETURN(uint32_t b, AsCount(l, 0, 1, 100));
    e->levels.push_back(b);
  }
  ASSIGN_OR_RETURN(e->k0, n["k0"].AsDouble(0.0));
  if (e->k0 < 0) return n["k0"].Error("must be >= 0");
  ASSIGN_OR_RETURN(e->tau, n["tau"].AsDouble(25.0));
  if (!(e->tau > 0)) return n["tau"].Error("must be > 0");
  ASSIGN_OR_RETURN(e->c_max, n["c_max"].AsDouble(1.0));
  if (e->c_max < 0) return n["c_max"].Error("must be >= 0");
  ASSIGN_OR_RETURN(e->l_norm, n["l_norm"].AsDouble(256.0));
  if (!(e->l_norm > 0)) return n["l_norm"].Error("must be > 0");
  return absl::OkStatus();
}

absl::Status ParseTeachers(const ConfigNode& n, const std::string& base, ExperimentConfig* cfg) {
  ASSIGN_OR_RETURN(auto items, n.Items());
  std::set<std::string> names;
  for (const ConfigNode& t : items) {
    RETURN_IF_ERROR(t.CheckKeys({"name", "model_config", "weights", "domains", "top_k", "full_vocab", "active"}));
    TeacherConfig tc;
    ASSIGN_OR_RETURN(tc.name, t["name"].AsString());
    if (tc.name.empty()) return t["name"].Error("must not be empty");
    if (!names.insert(tc.name).second) return t["name"].Error("duplicate teacher '" + tc.name + "'");
    ASSIGN_OR_RETURN(tc.model_config, t["model_config"].AsString(""));
    tc.model_config = Resolve(base, tc.model_config);
    ASSIGN_OR_RETURN(tc.weights, t["weights"].AsString(""));
    tc.weights = Resolve(base, tc.weights);
    ASSIGN_OR_RETURN(tc.domains, t["domains"].AsStringList());
    if (tc.domains.empty()) return t["domains"].Error("at least one domain or dataset is required");
    ASSIGN_OR_RETURN(tc.top_k, AsCount(t["top_k"], 0, 0, 1 << 20));
    ASSIGN_OR_RETURN(tc.full_vocab, t["full_vocab"].AsBool(tc.top_k == 0));
    if (tc.full_vocab && tc.top_k > 0) return t["top_k"].Error("top_k and full_vocab exclude each other");
    ASSIGN_OR_RETURN(tc.active, t["active"].AsBool(true));
    cfg->teachers.push_back(std::move(tc));
  }
  return absl::OkStatus();
}

absl::Status ParseTrainer(const ConfigNode& n, const RolloutConfig& rollout, TrainerConfig* t) {
  RETURN_IF_ERROR(n.CheckKeys({"address", "command", "sft_steps", "rl_steps", "publish_every",
                               "learning_rate", "sft_learning_rate", "clip_eps", "loss", "time_limit",
                               "teacher_steps", "lr_schedule", "ppo_epochs", "minibatches", "kl_coef"}));
  ASSIGN_OR_RETURN(t->address, n["address"].AsString("127.0.0.1:0"));
  if (n["command"].present()) {
    ASSIGN_OR_RETURN(t->command, n["command"].AsStringList());
  }
  ASSIGN_OR_RETURN(t->sft_steps, AsCount(n["sft_steps"], 0, 0, 1 << 24));
  ASSIGN_OR_RETURN(t->rl_steps, AsCount(n["rl_steps"], 100, 0, 1 << 24));
  ASSIGN_OR_RETURN(t->publish_every, AsCount(n["publish_every"], 1, 1, 1 << 24));
  ASSIGN_OR_RETURN(t->learning_rate, n["learning_rate"].AsDouble(1e-3));
  if (!(t->learning_rate > 0)) return n["learning_rate"].Error("must be > 0");
  ASSIGN_OR_RETURN(t->sft_learning_rate, n["sft_learning_rate"].AsDouble(3e-3));
  if (!(t->sft_learning_rate > 0)) return n["sft_learning_rate"].Error("must be > 0");
  ASSIGN_OR_RETURN(t->clip_eps, n["clip_eps"].AsDouble(0.2));
  if (!(t->clip_eps > 0)) return n["clip_eps"].Error("must be > 0");
  ASSIGN_OR_RETURN(t->loss, n["loss"].AsString("grpo"));
  if (t->loss != "grpo" && t->loss != "opd") return n["loss"].Error("must be 'grpo' or 'opd', got '" + t->loss + "'");
  ASSIGN_OR_RETURN(t->time_limit_ms, n["time_limit"].AsDurationMs(0));
  ASSIGN_OR_RETURN(t->teacher_steps, AsCount(n["teacher_steps"], 300, 1, 1 << 24));
  ASSIGN_OR_RETURN(t->lr_schedule, n["lr_schedule"].AsString("constant"));
  // "warmup-linear": "linear" after a linear rise over the first 10% of rl_steps (train.py).
  if (t->lr_schedule != "constant" && t->lr_schedule != "linear" && t->lr_schedule != "warmup-linear") {
    return n["lr_schedule"].Error("must be 'constant', 'linear' or 'warmup-linear', got '" + t->lr_schedule + "'");
  }
  ASSIGN_OR_RETURN(t->kl_coef, n["kl_coef"].AsDouble(0.0));
  if (!(t->kl_coef >= 0)) return n["kl_coef"].Error("must be >= 0");
  if (t->loss == "opd" && t->kl_coef > 0) return n["kl_coef"].Error("applies to loss 'grpo' only");
  ASSIGN_OR_RETURN(t->ppo_epochs, AsCount(n["ppo_epochs"], 1, 1, 64));
  const int64_t batch_samples = int64_t{rollout.group_size} * rollout.groups_per_step;
  ASSIGN_OR_RETURN(t->minibatches, AsCount(n["minibatches"], 1, 1, 1 << 16));
  if (t->minibatches > batch_samples) {
    return n["minibatches"].Error(absl::StrCat("must be <= the samples in a batch (rollout.group_size x ",
                                               "rollout.groups_per_step = ", batch_samples, "), got ",
                                               t->minibatches));
  }
  // OPD makes one update per batch; several would be ignored, so they are refused.
  if (t->loss == "opd" && t->ppo_epochs * t->minibatches > 1) {
    return n[t->ppo_epochs > 1 ? "ppo_epochs" : "minibatches"].Error("loss 'opd' makes one update per step; "
                                                                        "ppo_epochs and minibatches must be 1");
  }
  return absl::OkStatus();
}

}  // namespace

bool IsAgentCliScaffold(const std::string& scaffold) { return scaffold == "pi"; }

absl::StatusOr<ExperimentConfig> ParseExperimentConfig(const std::string& text, const std::string& name,
                                                       const std::string& base_dir) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseConfig(text, name));
  if (!root.is_map()) return root.Error("expected a map");
  RETURN_IF_ERROR(root.CheckKeys({"name", "state_dir", "scaffold", "sandbox_policy", "system_prompt",
                                  "system_template", "instance_template", "seed", "policy", "datasets", "rollout", "effort", "teachers", "trainer"}));
  ExperimentConfig cfg;
  cfg.file = name;
  ASSIGN_OR_RETURN(cfg.name, root["name"].AsString());
  ASSIGN_OR_RETURN(cfg.state_dir, root["state_dir"].AsString(""));
  if (cfg.state_dir.empty()) cfg.state_dir = absl::StrCat("runs/", cfg.name);
  cfg.state_dir = Resolve(base_dir, cfg.state_dir);
  ASSIGN_OR_RETURN(cfg.scaffold, root["scaffold"].AsString("single-turn"));
  // Every sample is a worker episode under one of the worker's built-in scaffolds or an agent
  // CLI in its sandbox.
  if (cfg.scaffold != "single-turn" && cfg.scaffold != "mini" && cfg.scaffold != "terminal" &&
      !IsAgentCliScaffold(cfg.scaffold)) {
    return root["scaffold"].Error(absl::StrCat("unknown scaffold '", cfg.scaffold,
                                               "' (single-turn, mini, terminal or pi)"));
  }
  ASSIGN_OR_RETURN(cfg.sandbox_policy, root["sandbox_policy"].AsString("default"));
  ASSIGN_OR_RETURN(cfg.system_prompt, root["system_prompt"].AsString(""));
  // The multi-turn scaffolds' own texts, replaced (worker::ScaffoldOptions).
  for (const char* key : {"system_template", "instance_template"}) {
    ASSIGN_OR_RETURN(std::string text, root[key].AsString(""));
    if (!root[key].present()) continue;
    if (cfg.scaffold == "single-turn") {
      return root[key].Error("the single-turn scaffold has no text of its own (use system_prompt)");
    }
    if (IsAgentCliScaffold(cfg.scaffold)) {
      return root[key].Error(absl::StrCat(cfg.scaffold, " writes its own texts; only mini and terminal take one"));
    }
    if (text.empty()) return root[key].Error("must not be empty (leave it out for the scaffold's own text)");
    if (std::string(key) == "instance_template" && text.find("{{task}}") == std::string::npos) {
      return root[key].Error("must contain {{task}}, where the task's instruction goes");
    }
    (std::string(key) == "system_template" ? cfg.system_template : cfg.instance_template) = std::move(text);
  }
  ASSIGN_OR_RETURN(int64_t seed, root["seed"].AsInt(1));
  cfg.seed = static_cast<uint64_t>(seed);

  ConfigNode p = root["policy"];
  RETURN_IF_ERROR(p.CheckKeys({"model_config", "model", "init", "seed"}));
  ASSIGN_OR_RETURN(cfg.policy.model_config, p["model_config"].AsString(""));
  cfg.policy.model_config = Resolve(base_dir, cfg.policy.model_config);
  if (p["model"].present()) {
    if (!p["model"].is_map()) return p["model"].Error("expected a map of ModelConfig fields");
    // Re-read the subtree as JSON: every ModelConfig field is a number, bool or list.
    std::ostringstream json;
    json << "{";
    bool first = true;
    for (const std::string& k : p["model"].keys()) {
      ASSIGN_OR_RETURN(std::string v, p["model"][k].AsString(""));
      if (p["model"][k].is_sequence()) {
        ASSIGN_OR_RETURN(auto list, p["model"][k].AsStringList());
        v = "[" + absl::StrJoin(list, ",") + "]";
      }
      json << (first ? "" : ",") << "\"" << k << "\":" << v;
      first = false;
    }
    json << "}";
    cfg.policy.model_json = json.str();
  }
  if (cfg.policy.model_config.empty() && cfg.policy.model_json.empty()) {
    return p.Error("policy.model_config or policy.model is required");
  }
  ASSIGN_OR_RETURN(cfg.policy.init, p["init"].AsString("random"));
  // "merge:CONFIG.yaml": the run merges first and starts from the merge (cli/run_command.cc).
  if (cfg.policy.init.starts_with("merge:")) {
    std::string recipe = cfg.policy.init.substr(6);
    if (recipe.empty()) return p["init"].Error("merge: needs a recipe file (merge:CONFIG.yaml)");
    cfg.policy.init = "merge:" + Resolve(base_dir, recipe);
  } else if (cfg.policy.init != "random") {
    cfg.policy.init = Resolve(base_dir, cfg.policy.init);
  }
  ASSIGN_OR_RETURN(int64_t pseed, p["seed"].AsInt(seed));
  cfg.policy.seed = static_cast<uint64_t>(pseed);

  cfg.file = name;
  RETURN_IF_ERROR(ParseDatasets(root["datasets"], &cfg));
  for (auto& d : cfg.datasets) {
    if (!d.source.starts_with("builtin:")) d.source = Resolve(base_dir, d.source);
  }
  // An agent CLI runs in a task's built environment with the CLI's layers on top: only task
  // folders have one.
  for (size_t i = 0; IsAgentCliScaffold(cfg.scaffold) && i < cfg.datasets.size(); ++i) {
    if (!std::filesystem::is_directory(cfg.datasets[i].source)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": datasets[", i, "].source: '", cfg.datasets[i].source,
                                                     "' is not a task folder; scaffold '", cfg.scaffold,
                                                     "' runs only over task folders"));
    }
  }
  RETURN_IF_ERROR(ParseRollout(root["rollout"], &cfg.rollout));
  RETURN_IF_ERROR(ParseEffort(root["effort"], &cfg.effort));
  RETURN_IF_ERROR(ParseTeachers(root["teachers"], base_dir, &cfg));
  RETURN_IF_ERROR(ParseTrainer(root["trainer"], cfg.rollout, &cfg.trainer));
  if (cfg.trainer.loss == "opd" && cfg.teachers.empty()) {
    return root["teachers"].Error("trainer.loss 'opd' needs at least one teacher");
  }
  return cfg;
}

absl::StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("experiment file '", path, "' cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = std::filesystem::path(path).parent_path().string();
  return ParseExperimentConfig(ss.str(), path, base);
}

}  // namespace flotilla::trainer_bridge
