#include "flotilla/merge/merge.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "checkpoint.h"
#include "compatibility.h"
#include "dare_mask.h"
#include "flotilla/common/status.h"
#include "merge_kernels.h"
#include "provenance.h"
#include "shard_writer.h"
#include "tensor_class.h"

namespace flotilla::merge {
namespace fs = std::filesystem;
namespace {

bool NormalizeByDefault(MergeMethod m) {
  return m == MergeMethod::kLinear || m == MergeMethod::kTies || m == MergeMethod::kDareTies;
}

double Param(const ParamSet* model, const ParamSet& global, const std::string& name, const TensorPlace& place,
             int n_layers, double dflt) {
  const ParamValue* v = model != nullptr ? model->Find(name, place.cls) : nullptr;
  // A model's own value (global or per class) wins; then the recipe's per-class, then global.
  if (v == nullptr) v = global.Find(name, place.cls);
  return v == nullptr ? dflt : v->At(place.layer, n_layers, place.at_end);
}

// Copies config.json and the tokenizer files of the base's folder.
absl::Status CopySideFiles(const Checkpoint& from, const fs::path& out) {
  if (!from.is_folder()) return absl::OkStatus();
  for (const auto& e : fs::directory_iterator(from.folder())) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (name == "model.safetensors.index.json" || name == "merge_provenance.json") continue;
    if (ext != ".json" && ext != ".txt" && ext != ".model" && ext != ".jinja" && ext != ".tiktoken") continue;
    std::error_code ec;
    fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("copying ", e.path().string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status PrepareOutDir(const std::string& out_dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec)) {
    if (!overwrite) {
      return absl::AlreadyExistsError(
          absl::StrCat("output folder '", out_dir, "' exists and is not empty (--overwrite replaces it)"));
    }
    fs::remove_all(out_dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("removing '", out_dir, "': ", ec.message()));
  }
  fs::create_directories(out_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("creating '", out_dir, "': ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MergeResult> RunMerge(const MergeConfig& config, const std::string& out_dir,
                                     const MergeOptions& options) {
  std::unique_ptr<Checkpoint> base;
  if (!config.base_model.empty()) {
    ASSIGN_OR_RETURN(base, Checkpoint::Open(config.base_model));
  }
  std::vector<std::unique_ptr<Checkpoint>> owned;
  std::vector<const Checkpoint*> models;
  for (const MergeModel& m : config.models) {
    ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> c, Checkpoint::Open(m.path));
    models.push_back(c.get());
    owned.push_back(std::move(c));
  }
  // The reference layout: the base, or for a linear merge without one, the first model.
  const Checkpoint& ref = base != nullptr ? *base : *models[0];
  for (const Checkpoint* m : models) {
    if (m != &ref) RETURN_IF_ERROR(CheckCompatible(ref, *m));
  }
  const bool use_base = config.method != MergeMethod::kLinear;

  int n_layers = 0;
  std::vector<PlannedTensor> plan;
  uint64_t total_bytes = 0;
  for (const std::string& name : ref.names()) {
    const inference::TensorView* t = ref.Find(name);
    n_layers = std::max(n_layers, ClassifyTensor(name, t->shape.size()).layer + 1);
    PlannedTensor p{name, t->shape, config.dtype.value_or(t->dtype)};
    total_bytes += static_cast<uint64_t>(t->numel()) * inference::DTypeSize(p.dtype);
    plan.push_back(std::move(p));
  }
  RETURN_IF_ERROR(PrepareOutDir(out_dir, options.overwrite));
  ShardWriter writer(out_dir, plan, options.max_shard_bytes);

  MergeResult result;
  const size_t k = models.size();
  std::vector<std::vector<float>> inputs(k);
  std::vector<float> base_buf, out_buf;
  UnitScratch scratch;
  uint64_t done_bytes = 0;
  for (const PlannedTensor& planned : plan) {
    const std::string& name = planned.name;
    const inference::TensorView* bt = ref.Find(name);
    const TensorPlace place = ClassifyTensor(name, bt->shape.size());
    const size_t numel = static_cast<size_t>(bt->numel());
    const size_t units = place.per_expert_slices && bt->shape[0] > 0 ? static_cast<size_t>(bt->shape[0]) : 1;
    const size_t unit_n = units > 0 ? numel / units : numel;

    UnitParams p;
    for (size_t m = 0; m < k; ++m) {
      const ParamSet* own = &config.models[m].params;
      p.weights.push_back(Param(own, config.params, "weight", place, n_layers, 1.0));
      p.densities.push_back(Param(own, config.params, "density", place, n_layers, 1.0));
      p.dare_keys.push_back(DareKey(config.seed, name, m));
    }
    p.t = Param(nullptr, config.params, "t", place, n_layers, 0.5);
    p.lambda = Param(nullptr, config.params, "lambda", place, n_layers, 1.0);
    p.normalize = Param(nullptr, config.params, "normalize", place, n_layers,
                        NormalizeByDefault(config.method) ? 1.0 : 0.0) != 0.0;
    for (double d : p.densities) {
      if (!(d > 0.0 && d <= 1.0)) {
        return absl::InvalidArgumentError(absl::StrCat(config.file, ": density for tensor '", name,
                                                       "' interpolates to ", d, ", outside (0, 1]"));
      }
    }
    if (!(p.t >= 0.0 && p.t <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(config.file, ": t for tensor '", name, "' is ", p.t));
    }

    UnitInputs in;
    in.n = unit_n;
    for (size_t u = 0; u < units; ++u) {
      const size_t offset = u * unit_n;
      in.models.clear();
      for (size_t m = 0; m < k; ++m) {
        const inference::TensorView* t = models[m]->Find(name);
        inputs[m].resize(unit_n);
        models[m]->ReadF32(*t, offset, unit_n, inputs[m].data());
        models[m]->Release(*t, offset, unit_n);
        in.models.push_back(inputs[m].data());
      }
      in.base = nullptr;
      if (use_base) {
        base_buf.resize(unit_n);
        base->ReadF32(*bt, offset, unit_n, base_buf.data());
        base->Release(*bt, offset, unit_n);
        in.base = base_buf.data();
      }
      out_buf.resize(unit_n);
      p.index_offset = offset;
      MergeUnit(config.method, in, p, &scratch, out_buf.data());
      RETURN_IF_ERROR(writer.Append(out_buf.data(), unit_n));
      ++result.units;
    }
    ++result.tensors;
    done_bytes += static_cast<uint64_t>(numel) * inference::DTypeSize(planned.dtype);
    if (options.progress) options.progress(done_bytes, total_bytes);
  }
  RETURN_IF_ERROR(writer.Finish());
  result.shards = writer.shard_paths();
  result.bytes_written = writer.bytes_written();
  result.weights_path = result.shards.size() == 1
                            ? result.shards[0]
                            : (fs::path(out_dir) / "model.safetensors.index.json").string();
  RETURN_IF_ERROR(CopySideFiles(ref, out_dir));
  RETURN_IF_ERROR(WriteProvenance(config, base.get(), models, result.shards,
                                  (fs::path(out_dir) / "merge_provenance.json").string()));
  return result;
}

absl::StatusOr<std::string> ResolveMergeInit(const std::string& init_spec, const std::string& out_dir) {
  constexpr std::string_view kPrefix = "merge:";
  if (!init_spec.starts_with(kPrefix)) return init_spec;
  ASSIGN_OR_RETURN(MergeConfig cfg, LoadMergeConfig(init_spec.substr(kPrefix.size())));
  MergeOptions opts;
  opts.overwrite = true;
  opts.max_shard_bytes = UINT64_MAX;  // the trainer reads one file
  auto r = RunMerge(cfg, out_dir, opts);
  if (!r.ok()) return Annotate(r.status(), absl::StrCat("policy.init ", init_spec));
  return r->weights_path;
}

}  // namespace flotilla::merge
