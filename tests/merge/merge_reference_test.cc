// Each merge method against a straightforward PyTorch reference (reference_merge.py) on small
// checkpoints in both Hugging Face and Flotilla layouts: every output tensor must agree within
// 1e-6 of its largest magnitude. DARE compares with a fixed seed through the documented mask.
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "flotilla/merge/merge.h"
#include "gtest/gtest.h"
#include "merge/merge_test_util.h"
#include "nlohmann/json.hpp"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::merge {
namespace {

using fixtures::TensorMap;

struct Case {
  std::string label;
  std::string method;
  bool base;
  std::vector<std::string> models;  // m1 m2 m3 near
  std::vector<double> weights;
  std::vector<double> densities;
  double t = 0.5, lambda = 1.0;
  int normalize = -1;  // -1: the method's default
  uint64_t seed = 0;
};

bool DefaultNormalize(const std::string& m) { return m == "linear" || m == "ties" || m == "dare_ties"; }

std::vector<Case> Cases() {
  return {
      {"linear", "linear", false, {"m1", "m2"}, {0.3, 0.7}, {1, 1}},
      {"linear_unnormalized", "linear", false, {"m1", "m2", "m3"}, {0.5, 0.25, 1.0}, {1, 1, 1}, 0.5, 1.0, 0},
      {"slerp", "slerp", true, {"m1"}, {1}, {1}, 0.3},
      {"slerp_colinear", "slerp", true, {"near"}, {1}, {1}, 0.6},
      {"task_arithmetic", "task_arithmetic", true, {"m1", "m2"}, {1.0, 0.5}, {1, 1}, 0.5, 0.8},
      {"ties", "ties", true, {"m1", "m2"}, {1.0, 1.0}, {0.4, 0.7}},
      {"ties_unnormalized", "ties", true, {"m1", "m2", "m3"}, {0.6, 1.0, 0.8}, {0.5, 0.3, 0.9}, 0.5, 0.9, 0},
      {"dare_linear", "dare_linear", true, {"m1", "m2"}, {1.0, 0.7}, {0.5, 0.3}, 0.5, 1.0, -1, 11},
      {"dare_ties", "dare_ties", true, {"m1", "m2"}, {1.0, 1.0}, {0.5, 0.6}, 0.5, 1.0, -1, 3},
      {"model_stock", "model_stock", true, {"m1", "m2", "m3"}, {1, 1, 1}, {1, 1, 1}},
  };
}

class MergeReferenceTest : public ::testing::TestWithParam<bool> {};

TEST_P(MergeReferenceTest, EveryMethodMatchesPyTorch) {
  int st = 0;
  flotilla::testing::RunShell("/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null", &st);
  if (st != 0) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is not available (python3-torch)";
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "FLOTILLA_SOURCE_DIR is set by CTest";
  const bool hf = GetParam();
  flotilla::testing::TempDir dir;
  auto layout = hf ? fixtures::HfLayout() : fixtures::FlotillaLayout();
  TensorMap base = fixtures::Gaussian(layout, 1, 1.0f);
  std::map<std::string, TensorMap> parents = {
      {"base", base},
      {"m1", fixtures::Plus(base, fixtures::Gaussian(layout, 2, 1.0f), 0.5f)},
      {"m2", fixtures::Plus(base, fixtures::Gaussian(layout, 3, 1.0f), 0.3f)},
      {"m3", fixtures::Plus(fixtures::Plus(base, fixtures::Gaussian(layout, 4, 1.0f), 0.3f),
                           fixtures::Gaussian(layout, 2, 1.0f), 0.2f)},
      {"near", fixtures::Plus(base, fixtures::Gaussian(layout, 5, 1.0f), 1e-3f)}};
  std::map<std::string, std::string> path, file;  // what the recipe names; the weights file
  for (const auto& [name, m] : parents) {
    if (hf) {
      path[name] = dir.file(name);
      fixtures::WriteHfFolder(m, path[name]);
      file[name] = path[name] + "/model.safetensors";
    } else {
      path[name] = file[name] = dir.file(name + ".safetensors");
      fixtures::WriteTensors(m, path[name]);
    }
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (const Case& c : Cases()) {
    std::string yaml = absl::StrCat("method: ", c.method, "\nseed: ", c.seed, "\n");
    if (c.base) absl::StrAppend(&yaml, "base_model: ", path["base"], "\n");
    absl::StrAppend(&yaml, "parameters: {t: ", c.t, ", lambda: ", c.lambda);
    if (c.normalize >= 0) absl::StrAppend(&yaml, ", normalize: ", c.normalize ? "true" : "false");
    absl::StrAppend(&yaml, "}\nmodels:\n");
    nlohmann::json job = {{"method", c.method}, {"t", c.t}, {"lambda", c.lambda}, {"seed", c.seed},
                          {"normalize", c.normalize < 0 ? DefaultNormalize(c.method) : c.normalize == 1},
                          {"base", c.base ? nlohmann::json(file["base"]) : nlohmann::json()},
                          {"out", dir.file("ref-" + c.label + ".safetensors")}};
    for (size_t i = 0; i < c.models.size(); ++i) {
      absl::StrAppend(&yaml, "  - model: ", path[c.models[i]], "\n    parameters: {weight: ", c.weights[i],
                      ", density: ", c.densities[i], "}\n");
      job["models"].push_back({{"path", file[c.models[i]]}, {"weight", c.weights[i]}, {"density", c.densities[i]}});
    }
    jobs.push_back(job);
    auto cfg = ParseMergeConfig(yaml, c.label + ".yaml", "");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto r = RunMerge(*cfg, dir.file("out-" + c.label));
    ASSERT_TRUE(r.ok()) << c.label << ": " << r.status();
    EXPECT_EQ(r->shards.size(), 1u);
  }
  fixtures::WriteText(dir.file("jobs.json"), jobs.dump());
  std::string out = flotilla::testing::RunShell(absl::StrCat("FLOTILLA_SOURCE_DIR=", src, " /usr/bin/python3 ", src,
                                                   "/tests/merge/reference_merge.py ", dir.file("jobs.json"), " 2>&1"),
                                      &st);
  ASSERT_EQ(st, 0) << out;
  for (const Case& c : Cases()) {
    TensorMap got = fixtures::ReadTensors(dir.file("out-" + c.label) + "/model.safetensors");
    TensorMap want = fixtures::ReadTensors(dir.file("ref-" + c.label + ".safetensors"));
    ASSERT_EQ(got.size(), layout.size()) << c.label;
    ASSERT_EQ(want.size(), layout.size()) << c.label;
    for (const auto& [name, w] : want) {
      const fixtures::Tensor& g = got.at(name);
      ASSERT_EQ(g.shape, w.shape) << c.label << " " << name;
      double scale = 0, err = 0;
      for (size_t i = 0; i < w.values.size(); ++i) {
        scale = std::max(scale, std::fabs(static_cast<double>(w.values[i])));
        err = std::max(err, std::fabs(static_cast<double>(g.values[i]) - w.values[i]));
      }
      EXPECT_LE(err, 1e-6 * scale) << c.label << " " << name << ": max error " << err << " at scale " << scale;
    }
    // The merge changed something (a method that copied the base would pass trivially).
    const auto& any = want.begin()->second.values;
    const auto& b = base.at(want.begin()->first).values;
    EXPECT_NE(any, b) << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MergeReferenceTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "HuggingFace" : "Flotilla"; });

}  // namespace
}  // namespace flotilla::merge
