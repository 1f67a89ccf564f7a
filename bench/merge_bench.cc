#include "merge_bench.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dare_mask.h"
#include "flotilla/common/status.h"
#include "flotilla/merge/merge.h"
#include "shard_writer.h"

namespace flotilla::bench {
namespace {

constexpr int64_t kHidden = 2048, kExperts = 8, kExpertHidden = 512;

std::vector<merge::PlannedTensor> Layout(int layers) {
  std::vector<merge::PlannedTensor> plan;
  using inference::DType;
  for (int l = 0; l < layers; ++l) {
    std::string p = absl::StrCat("model.layers.", l, ".");
    plan.push_back({p + "input_layernorm.weight", {kHidden}, DType::kF32});
    plan.push_back({p + "self_attn.q_proj.weight", {kHidden, kHidden}, DType::kF32});
    plan.push_back({p + "mlp.gate.weight", {kExperts, kHidden}, DType::kF32});
    plan.push_back({p + "mlp.experts.gate_up_proj", {kExperts, 2 * kExpertHidden, kHidden}, DType::kF32});
    plan.push_back({p + "mlp.experts.down_proj", {kExperts, kHidden, kExpertHidden}, DType::kF32});
  }
  return plan;
}

uint64_t LayerBytes() {
  uint64_t n = 0;
  for (const auto& t : Layout(1)) {
    uint64_t e = 1;
    for (int64_t s : t.shape) e *= static_cast<uint64_t>(s);
    n += e * 4;
  }
  return n;
}

// Deterministic values in [-1, 1): model 0 is the base, the others the base plus 0.05 noise.
absl::Status WriteCheckpoint(const std::string& dir, const std::vector<merge::PlannedTensor>& plan, int model) {
  std::filesystem::create_directories(dir);
  merge::ShardWriter w(dir, plan, UINT64_MAX);
  std::vector<float> chunk(1 << 20);
  uint64_t index = 0;
  for (const auto& t : plan) {
    uint64_t n = 1;
    for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
    for (uint64_t done = 0; done < n; done += chunk.size()) {
      const size_t c = static_cast<size_t>(std::min<uint64_t>(chunk.size(), n - done));
      for (size_t i = 0; i < c; ++i, ++index) {
        auto unit = [](uint64_t h) { return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f; };
        float v = unit(merge::Mix64(index * merge::kGolden));
        if (model > 0) v += 0.05f * unit(merge::Mix64((index + 1) * merge::kGolden ^ (model * 0x1234567ull)));
        chunk[i] = v;
      }
      RETURN_IF_ERROR(w.Append(chunk.data(), c));
    }
  }
  RETURN_IF_ERROR(w.Finish());
  std::ofstream(dir + "/config.json") << R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_experts": 8})";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MergeBenchResult> RunMergeMemoryBench(const MergeBenchOptions& options) {
  namespace fs = std::filesystem;
  MergeBenchResult r;
  r.layers = static_cast<int>((options.bytes_each + LayerBytes() - 1) / LayerBytes());
  r.bytes_each = LayerBytes() * static_cast<uint64_t>(r.layers);
  r.largest_tensor_bytes = 4ull * kExperts * 2 * kExpertHidden * kHidden;
  const auto plan = Layout(r.layers);
  fs::create_directories(options.dir);
  const std::string base = options.dir + "/base", m1 = options.dir + "/m1", m2 = options.dir + "/m2";
  const bool linear = options.method == "linear";
  if (!linear) RETURN_IF_ERROR(WriteCheckpoint(base, plan, 0));
  RETURN_IF_ERROR(WriteCheckpoint(m1, plan, 1));
  RETURN_IF_ERROR(WriteCheckpoint(m2, plan, 2));
  std::string yaml = absl::StrCat("method: ", options.method, "\nseed: 5\n");
  if (!linear) absl::StrAppend(&yaml, "base_model: ", base, "\n");
  absl::StrAppend(&yaml, "models:\n  - model: ", m1, "\n    parameters: {weight: 0.5, density: 0.5}\n  - model: ", m2,
                  "\n    parameters: {weight: 0.5, density: 0.5}\n");
  ASSIGN_OR_RETURN(merge::MergeConfig cfg, merge::ParseMergeConfig(yaml, "bench.yaml", ""));
  const std::string out = options.dir + "/out";

  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    merge::MergeOptions mo;
    mo.overwrite = true;
    mo.max_shard_bytes = 1ull << 30;
    auto res = merge::RunMerge(cfg, out, mo);
    _exit(res.ok() ? 0 : 1);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) < 0) return ErrnoStatus("wait4");
  r.merge_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("the merging child failed (status ", status, ")"));
  }
  r.peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() == ".safetensors") r.output_bytes += fs::file_size(e.path());
  }
  std::error_code ec;
  fs::remove_all(options.dir, ec);
  return r;
}

}  // namespace flotilla::bench
