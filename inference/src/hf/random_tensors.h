// Random tensors by name, drawn from one seed, written as one safetensors file in one dtype:
// what `flotilla model init` (hf_init.cc) and the tests' model folders of other families make
// their checkpoints from. Owns the values of every tensor until they are written.
//
//   RandomTensors t(seed, DType::kBF16);
//   t.Normal("model.norm.weight", {hidden}, 0.1f, 1.0f);
//   RETURN_IF_ERROR(t.Write(dir + "/model.safetensors"));
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::inference {

class RandomTensors {
 public:
  explicit RandomTensors(uint64_t seed, DType dtype) : rng_(seed), dtype_(dtype) {}
  std::vector<float>& values(const std::string& name) { return values_.at(name); }
  void Normal(const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float>& v = values_[name];
    v.resize(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng_);
    shapes_[name] = std::move(shape);
  }
  // Moves the named tensors, in order, into one tensor `into` of `shape`.
  void Concat(const std::vector<std::string>& names, const std::string& into, std::vector<int64_t> shape) {
    std::vector<float>& out = values_[into];
    for (const std::string& n : names) {
      const std::vector<float>& v = values_.at(n);
      out.insert(out.end(), v.begin(), v.end());
      values_.erase(n);
      shapes_.erase(n);
    }
    shapes_[into] = std::move(shape);
  }
  absl::Status Write(const std::string& path) const {
    std::vector<TensorToWrite> out;
    for (const auto& [name, v] : values_) out.push_back({name, shapes_.at(name), v.data(), dtype_});
    return WriteSafetensors(path, out, {{"format", "pt"}});
  }

 private:
  std::mt19937_64 rng_;
  DType dtype_;
  std::map<std::string, std::vector<float>> values_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace flotilla::inference
