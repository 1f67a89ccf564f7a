#include "checkpoint.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::merge {
namespace fs = std::filesystem;

namespace {

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  return j;
}

// The safetensors files of a folder: the index's shards, else model.safetensors, else the one
// .safetensors file there is.
absl::StatusOr<std::vector<std::string>> WeightFiles(const fs::path& dir) {
  fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    ASSIGN_OR_RETURN(nlohmann::json j, ReadJson(index.string()));
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index.string(), ": weight_map: missing or not an object"));
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(index.string(), ": weight_map.", name, ": not a file name"));
      }
      shards.insert((dir / file.get<std::string>()).string());
    }
    return std::vector<std::string>(shards.begin(), shards.end());
  }
  if (fs::exists(dir / "model.safetensors")) return std::vector<std::string>{(dir / "model.safetensors").string()};
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") found.push_back(e.path().string());
  }
  if (found.size() == 1) return found;
  return absl::InvalidArgumentError(absl::StrCat(
      dir.string(), ": ", found.empty() ? "no .safetensors file" : "several .safetensors files and no index",
      " (want model.safetensors, shards with model.safetensors.index.json, or one file)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& path) {
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  c->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    c->is_folder_ = true;
    c->folder_ = path;
    ASSIGN_OR_RETURN(c->files_, WeightFiles(path));
  } else if (fs::is_regular_file(path, ec)) {
    c->folder_ = fs::path(path).parent_path().string();
    c->files_ = {path};
  } else {
    return absl::NotFoundError(absl::StrCat("model '", path, "': no such folder or file"));
  }
  fs::path config = fs::path(c->folder_) / "config.json";
  if (c->is_folder_ && fs::exists(config)) {
    ASSIGN_OR_RETURN(c->config_, ReadJson(config.string()));
  }
  for (const std::string& f : c->files_) {
    auto file = inference::SafetensorsFile::Open(f);
    if (!file.ok()) return Annotate(file.status(), absl::StrCat("model '", path, "'"));
    std::vector<std::pair<const uint8_t*, std::string>> order;
    for (const auto& [name, view] : (*file)->tensors()) {
      if (c->tensors_.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat("model '", path, "': tensor '", name, "' is in two files"));
      }
      c->tensors_[name] = &view;
      order.emplace_back(view.data, name);
    }
    std::sort(order.begin(), order.end());
    for (auto& [ptr, name] : order) c->names_.push_back(std::move(name));
    c->mapped_.push_back(std::move(*file));
  }
  return c;
}

const inference::TensorView* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

void Checkpoint::ReadF32(const inference::TensorView& t, size_t offset, size_t count, float* out) const {
  if (t.dtype == inference::DType::kF32) {
    std::memcpy(out, t.data + offset * 4, count * 4);
    return;
  }
  const uint8_t* p = t.data + offset * 2;
  for (size_t i = 0; i < count; ++i) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    out[i] = inference::Bf16ToF32(b);
  }
}

void Checkpoint::Release(const inference::TensorView& t, size_t offset, size_t count) const {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const size_t esize = inference::DTypeSize(t.dtype);
  uintptr_t begin = reinterpret_cast<uintptr_t>(t.data + offset * esize);
  uintptr_t end = begin + count * esize;
  begin &= ~(page - 1);
  end = (end + page - 1) & ~(page - 1);
  // A read-only private mapping: dropped pages come back from the file when touched, so a page
  // shared with a neighbouring tensor is at worst read twice. Failure only costs memory.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace flotilla::merge
