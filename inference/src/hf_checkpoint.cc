#include "hf_checkpoint.h"

#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"
#include "parallel_chunks.h"

namespace flotilla::inference {
namespace {

constexpr int64_t kFp8Block = 128;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ShapeText(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

}  // namespace

absl::StatusOr<std::unique_ptr<HfCheckpoint>> HfCheckpoint::Open(const std::string& dir) {
  std::unique_ptr<HfCheckpoint> c(new HfCheckpoint());
  c->dir_ = dir;
  const std::string index_path = absl::StrCat(dir, "/model.safetensors.index.json");
  const std::string single_path = absl::StrCat(dir, "/model.safetensors");
  if (Exists(index_path)) {
    c->listing_ = index_path;
    std::ifstream in(index_path);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": not a JSON object"));
    }
    if (!j.contains("weight_map") || !j.at("weight_map").is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": field 'weight_map' must be an object"));
    }
    std::map<std::string, const SafetensorsFile*> opened;
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": field 'weight_map.", it.key(), "' must be a file name"));
      }
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": field 'weight_map.", it.key(), "' names '", shard, "', not a file in the folder"));
      }
      auto o = opened.find(shard);
      if (o == opened.end()) {
        ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f, SafetensorsFile::Open(absl::StrCat(dir, "/", shard)));
        c->files_.push_back(std::move(f));
        o = opened.emplace(shard, c->files_.back().get()).first;
      }
      auto t = o->second->tensors().find(it.key());
      if (t == o->second->tensors().end()) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map puts tensor '", it.key(), "' in ",
                                                       o->second->path(), ", which has no such tensor"));
      }
      c->where_[it.key()] = {o->second, &t->second};
    }
  } else if (Exists(single_path)) {
    c->listing_ = single_path;
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f, SafetensorsFile::Open(single_path));
    c->files_.push_back(std::move(f));
    for (const auto& [name, t] : c->files_.back()->tensors()) c->where_[name] = {c->files_.back().get(), &t};
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": no model.safetensors or model.safetensors.index.json"));
  }
  return c;
}

std::string HfCheckpoint::FileOf(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? listing_ : it->second.first->path();
}

absl::StatusOr<const TensorView*> HfCheckpoint::View(const std::string& name,
                                                     const std::vector<int64_t>& shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(listing_, ": missing tensor '", name, "'"));
  }
  const TensorView* t = it->second.second;
  if (t->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(it->second.first->path(), ": tensor '", name, "' has shape ",
                                                   ShapeText(t->shape), ", config.json wants ", ShapeText(shape)));
  }
  return t;
}

absl::Status HfCheckpoint::Read(const std::string& name, const std::vector<int64_t>& shape,
                                std::vector<float>* out) const {
  ASSIGN_OR_RETURN(const TensorView* view, View(name, shape));
  const TensorView& t = *view;
  const std::string& file = where_.find(name)->second.first->path();
  const size_t n = static_cast<size_t>(t.numel());
  out->resize(n);
  const TensorView* scale = nullptr;
  int64_t rows = 1, cols = 1, srows = 0, scols = 0;
  if (t.dtype == DType::kF8E4M3) {
    const std::string sname = name + "_scale_inv";
    auto s = where_.find(sname);
    if (s == where_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", name, "' is F8_E4M3 but '", sname,
                                                     "' (its block scales) is missing"));
    }
    scale = s->second.second;
    if (shape.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", name, "' is F8_E4M3 with fewer than 2 dims"));
    }
    rows = shape[shape.size() - 2];
    cols = shape.back();
    srows = (rows + kFp8Block - 1) / kFp8Block;
    scols = (cols + kFp8Block - 1) / kFp8Block;
    std::vector<int64_t> want(shape.begin(), shape.end() - 2);
    want.push_back(srows);
    want.push_back(scols);
    if (scale->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(s->second.first->path(), ": tensor '", sname, "' has shape ",
                                                     ShapeText(scale->shape), ", 128x128 blocks of '", name,
                                                     "' want ", ShapeText(want)));
    }
    if (scale->dtype == DType::kF8E4M3) {
      return absl::InvalidArgumentError(absl::StrCat(s->second.first->path(), ": tensor '", sname, "' must not be F8_E4M3"));
    }
  }
  std::atomic<size_t> first_bad{n};
  ForChunks(n, [&](size_t begin, size_t end) {
    float* dst = out->data();
    for (size_t i = begin; i < end; ++i) {
      float v = ElementAsF32(t, i);
      if (scale != nullptr) {
        const int64_t mat = static_cast<int64_t>(i) / (rows * cols), rc = static_cast<int64_t>(i) % (rows * cols);
        const int64_t r = rc / cols, col = rc % cols;
        v *= ElementAsF32(*scale, static_cast<size_t>((mat * srows + r / kFp8Block) * scols + col / kFp8Block));
      }
      if (!std::isfinite(v)) {
        size_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
        break;
      }
      dst[i] = v;
    }
  });
  if (first_bad.load() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": tensor '", name, "' has a non-finite value at index ", first_bad.load()));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::inference
