// The merge recipe: a mergekit-like YAML naming the parents, the method and its parameters.
//
//   method: ties                      # linear slerp task_arithmetic ties dare_linear dare_ties model_stock
//                                     # (mergekit's key merge_method is accepted too)
//   base_model: runs/a/base           # a folder (Hugging Face or Flotilla) or one .safetensors file
//   models:
//     - model: runs/a/weights/v100.safetensors
//       parameters: {weight: 0.5, density: 0.6, routed_experts: {density: 0.3}}
//     - model: runs/b/weights/v100.safetensors
//       parameters: {weight: 0.5, density: [0.2, 0.8]}   # a gradient over the layers
//   parameters:                       # defaults for every tensor, then per tensor class
//     lambda: 1.0
//     normalize: true
//     attention: {t: [0, 0.5, 1]}
//     router: {lambda: 0.5}
//   dtype: bfloat16                   # float32 | bfloat16; absent: each tensor keeps the base's
//   seed: 7                           # DARE's drop masks
//
// A value is a number or a list of numbers; a list is a gradient: its points are spread evenly
// over the layers and each layer takes the linear interpolation at layer/(layers-1). Tensors
// outside the layers take the list's first value (input embeddings) or its last (final norm,
// lm_head). Tensor classes and how names map to them: tensor_class.h. Plain data; parsing is the
// only logic here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::merge {

enum class MergeMethod { kLinear, kSlerp, kTaskArithmetic, kTies, kDareLinear, kDareTies, kModelStock };
const char* MergeMethodName(MergeMethod m);

// Tensor classes a parameter can be set for (see tensor_class.h for the name rules).
enum class TensorClass {
  kAttention,
  kRouter,
  kRoutedExperts,
  kSharedExperts,
  kNorms,
  kEmbeddings,
  kOther,  // dense MLPs and anything unrecognised: only the global defaults apply
};
constexpr int kTensorClassCount = 7;
const char* TensorClassName(TensorClass c);

// A constant (one point) or a gradient over the layers (several points).
struct ParamValue {
  std::vector<double> points;
  // The value for `layer` of `n_layers`; layer < 0 is a tensor outside the layers, which takes
  // the first point (at_end false) or the last (at_end true).
  double At(int layer, int n_layers, bool at_end) const;
};

// Named parameters, global and per tensor class; a class's value wins over the global one.
struct ParamSet {
  std::map<std::string, ParamValue> global;
  std::array<std::map<std::string, ParamValue>, kTensorClassCount> by_class;
  const ParamValue* Find(const std::string& name, TensorClass c) const;
};

struct MergeModel {
  std::string path;  // resolved against the YAML's folder
  ParamSet params;   // weight, density
};

struct MergeConfig {
  std::string file;  // the YAML's path, for messages
  std::string text;  // the YAML as read, recorded in the provenance
  MergeMethod method = MergeMethod::kLinear;
  std::string base_model;  // empty only for linear
  std::vector<MergeModel> models;
  ParamSet params;  // t, lambda, normalize; weight and density as defaults for every model
  std::optional<inference::DType> dtype;
  uint64_t seed = 0;
};

// Parses and checks a recipe: every error names the file, line and field
// ("merge.yaml:7: models[1].parameters.density: 1.5 is outside (0, 1]"). Relative paths are
// resolved against `base_dir`.
absl::StatusOr<MergeConfig> ParseMergeConfig(const std::string& text, const std::string& name,
                                             const std::string& base_dir);
absl::StatusOr<MergeConfig> LoadMergeConfig(const std::string& path);

}  // namespace flotilla::merge
