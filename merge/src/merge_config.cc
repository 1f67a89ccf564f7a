#include "flotilla/merge/merge_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/config.h"
#include "flotilla/common/status.h"

namespace flotilla::merge {

const char* MergeMethodName(MergeMethod m) {
  switch (m) {
    case MergeMethod::kLinear: return "linear";
    case MergeMethod::kSlerp: return "slerp";
    case MergeMethod::kTaskArithmetic: return "task_arithmetic";
    case MergeMethod::kTies: return "ties";
    case MergeMethod::kDareLinear: return "dare_linear";
    case MergeMethod::kDareTies: return "dare_ties";
    case MergeMethod::kModelStock: return "model_stock";
  }
  return "?";
}

const char* TensorClassName(TensorClass c) {
  switch (c) {
    case TensorClass::kAttention: return "attention";
    case TensorClass::kRouter: return "router";
    case TensorClass::kRoutedExperts: return "routed_experts";
    case TensorClass::kSharedExperts: return "shared_experts";
    case TensorClass::kNorms: return "norms";
    case TensorClass::kEmbeddings: return "embeddings";
    case TensorClass::kOther: return "other";
  }
  return "?";
}

double ParamValue::At(int layer, int n_layers, bool at_end) const {
  if (points.size() == 1) return points[0];
  double pos;  // 0..1 along the layers
  if (layer < 0) {
    pos = at_end ? 1.0 : 0.0;
  } else {
    pos = n_layers > 1 ? static_cast<double>(layer) / (n_layers - 1) : 0.0;
  }
  double x = pos * static_cast<double>(points.size() - 1);
  size_t i = std::min(static_cast<size_t>(x), points.size() - 2);
  double f = x - static_cast<double>(i);
  return points[i] + (points[i + 1] - points[i]) * f;
}

const ParamValue* ParamSet::Find(const std::string& name, TensorClass c) const {
  const auto& cls = by_class[static_cast<int>(c)];
  if (auto it = cls.find(name); it != cls.end()) return &it->second;
  if (auto it = global.find(name); it != global.end()) return &it->second;
  return nullptr;
}

namespace {

constexpr std::string_view kClassKeys[] = {"attention", "router", "routed_experts", "shared_experts",
                                           "norms", "embeddings"};

// A finite number within the parameter's range.
absl::StatusOr<double> ParsePoint(const ConfigNode& n, const std::string& key) {
  ASSIGN_OR_RETURN(double d, n.AsDouble());
  if (!std::isfinite(d)) return n.Error("not a finite number");
  if (key == "density" && !(d > 0.0 && d <= 1.0)) return n.Error(absl::StrCat(d, " is outside (0, 1]"));
  if (key == "t" && !(d >= 0.0 && d <= 1.0)) return n.Error(absl::StrCat(d, " is outside [0, 1]"));
  return d;
}

absl::StatusOr<ParamValue> ParseValue(const ConfigNode& n, const std::string& key) {
  ParamValue v;
  if (key == "normalize") {
    if (n.is_sequence()) return n.Error("normalize is one true or false, not a gradient");
    ASSIGN_OR_RETURN(bool b, n.AsBool());
    v.points.push_back(b ? 1.0 : 0.0);
    return v;
  }
  if (!n.is_sequence()) {
    ASSIGN_OR_RETURN(double d, ParsePoint(n, key));
    v.points.push_back(d);
    return v;
  }
  ASSIGN_OR_RETURN(std::vector<ConfigNode> items, n.Items());
  if (items.empty()) return n.Error("a gradient needs at least one value");
  for (const ConfigNode& item : items) {
    ASSIGN_OR_RETURN(double d, ParsePoint(item, key));
    v.points.push_back(d);
  }
  return v;
}

// Reads `node` (a map of parameter names, and per-class maps when `allow_classes`).
absl::Status ParseParams(const ConfigNode& node, std::initializer_list<std::string_view> names,
                         bool allow_classes, ParamSet* out) {
  if (!node.present()) return absl::OkStatus();
  if (!node.is_map()) return node.Error("expected a map of parameters");
  for (const std::string& key : node.keys()) {
    ConfigNode child = node[key];
    auto cls = std::find(std::begin(kClassKeys), std::end(kClassKeys), key);
    if (cls != std::end(kClassKeys)) {
      if (!allow_classes) return child.Error("tensor classes are not allowed here");
      if (!child.is_map()) return child.Error("expected a map of parameters for this tensor class");
      for (const std::string& pk : child.keys()) {
        if (std::find(names.begin(), names.end(), pk) == names.end()) {
          return child[pk].Error("unknown parameter for this place");
        }
        ASSIGN_OR_RETURN(ParamValue v, ParseValue(child[pk], pk));
        out->by_class[cls - std::begin(kClassKeys)][pk] = std::move(v);
      }
      continue;
    }
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      return child.Error(
          "unknown parameter (want weight, density, t, lambda, normalize, or a tensor class: attention, "
          "router, routed_experts, shared_experts, norms, embeddings)");
    }
    ASSIGN_OR_RETURN(ParamValue v, ParseValue(child, key));
    out->global[key] = std::move(v);
  }
  return absl::OkStatus();
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute() || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

absl::StatusOr<MergeMethod> ParseMethod(const ConfigNode& n) {
  ASSIGN_OR_RETURN(std::string s, n.AsString());
  for (MergeMethod m : {MergeMethod::kLinear, MergeMethod::kSlerp, MergeMethod::kTaskArithmetic, MergeMethod::kTies,
                        MergeMethod::kDareLinear, MergeMethod::kDareTies, MergeMethod::kModelStock}) {
    if (s == MergeMethodName(m)) return m;
  }
  return n.Error(absl::StrCat("unknown method '", s,
                              "' (want linear, slerp, task_arithmetic, ties, dare_linear, dare_ties, model_stock)"));
}

bool UsesDensity(MergeMethod m) {
  return m == MergeMethod::kTies || m == MergeMethod::kDareLinear || m == MergeMethod::kDareTies;
}

}  // namespace

absl::StatusOr<MergeConfig> ParseMergeConfig(const std::string& text, const std::string& name,
                                             const std::string& base_dir) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseConfig(text, name));
  if (!root.is_map()) return root.Error("expected a map");
  RETURN_IF_ERROR(root.CheckKeys({"method", "merge_method", "base_model", "models", "parameters", "dtype", "seed"}));
  MergeConfig cfg;
  cfg.file = name;
  cfg.text = text;
  // mergekit spells it merge_method; either is accepted, not both.
  if (root["method"].present() && root["merge_method"].present()) {
    return root["merge_method"].Error("give method or merge_method, not both");
  }
  ASSIGN_OR_RETURN(cfg.method, ParseMethod(root[root["merge_method"].present() ? "merge_method" : "method"]));
  ASSIGN_OR_RETURN(std::string base, root["base_model"].AsString(""));
  cfg.base_model = Resolve(base_dir, base);
  RETURN_IF_ERROR(ParseParams(root["parameters"], {"weight", "density", "t", "lambda", "normalize"}, true,
                              &cfg.params));
  ConfigNode models = root["models"];
  if (!models.present()) return models.Error("missing required field: a list of models");
  ASSIGN_OR_RETURN(std::vector<ConfigNode> items, models.Items());
  for (const ConfigNode& item : items) {
    if (!item.is_map()) return item.Error("expected a map with 'model' and optional 'parameters'");
    RETURN_IF_ERROR(item.CheckKeys({"model", "parameters"}));
    MergeModel m;
    ASSIGN_OR_RETURN(std::string path, item["model"].AsString());
    if (path.empty()) return item["model"].Error("empty model path");
    m.path = Resolve(base_dir, path);
    RETURN_IF_ERROR(ParseParams(item["parameters"], {"weight", "density"}, true, &m.params));
    if (m.path == cfg.base_model) return item["model"].Error("the base model cannot also be one of the models");
    cfg.models.push_back(std::move(m));
  }
  if (cfg.models.empty()) return models.Error("at least one model is required");

  const size_t k = cfg.models.size();
  switch (cfg.method) {
    case MergeMethod::kLinear:
      break;
    case MergeMethod::kSlerp:
      if (cfg.base_model.empty()) return root["base_model"].Error("slerp needs a base_model (the t=0 end)");
      if (k != 1) return models.Error(absl::StrCat("slerp merges the base with exactly one model, got ", k));
      if (cfg.params.Find("t", TensorClass::kOther) == nullptr) {
        return root["parameters"]["t"].Error("slerp needs t (0: the base, 1: the model)");
      }
      break;
    case MergeMethod::kModelStock:
      if (cfg.base_model.empty()) return root["base_model"].Error("model_stock needs a base_model");
      if (k < 2) return models.Error(absl::StrCat("model_stock needs at least two fine-tuned models, got ", k));
      break;
    default:
      if (cfg.base_model.empty()) {
        return root["base_model"].Error(absl::StrCat(MergeMethodName(cfg.method), " needs a base_model"));
      }
  }
  if (UsesDensity(cfg.method)) {
    for (size_t i = 0; i < k; ++i) {
      if (cfg.models[i].params.Find("density", TensorClass::kOther) == nullptr &&
          cfg.params.Find("density", TensorClass::kOther) == nullptr) {
        return items[i]["parameters"]["density"].Error(
            absl::StrCat(MergeMethodName(cfg.method), " needs a density for every model"));
      }
    }
  }
  ConfigNode dt = root["dtype"];
  if (dt.present()) {
    ASSIGN_OR_RETURN(std::string s, dt.AsString());
    if (s == "float32" || s == "f32" || s == "F32") {
      cfg.dtype = inference::DType::kF32;
    } else if (s == "bfloat16" || s == "bf16" || s == "BF16") {
      cfg.dtype = inference::DType::kBF16;
    } else {
      return dt.Error(absl::StrCat("unsupported dtype '", s, "' (want float32 or bfloat16)"));
    }
  }
  ASSIGN_OR_RETURN(int64_t seed, root["seed"].AsInt(0));
  if (seed < 0) return root["seed"].Error("must be >= 0");
  cfg.seed = static_cast<uint64_t>(seed);
  return cfg;
}

absl::StatusOr<MergeConfig> LoadMergeConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("merge config '", path, "' cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMergeConfig(ss.str(), path, std::filesystem::path(path).parent_path().string());
}

}  // namespace flotilla::merge
