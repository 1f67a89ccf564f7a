#include "flotilla/environments/env_store.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-" + NewId("w");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError(tmp + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

std::vector<std::string> StringList(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

std::string EnvImageToJson(const EnvImage& image) {
  json env = json::array();
  for (const auto& [k, v] : image.config.env) env.push_back(json::array({k, v}));
  json j = {{"tag", image.tag},
            {"top", image.top},
            {"env", env},
            {"workdir", image.config.workdir},
            {"user", image.config.user},
            {"shell", image.config.shell},
            {"entrypoint", image.config.entrypoint},
            {"cmd", image.config.cmd},
            {"expose", image.config.expose},
            {"labels", image.config.labels},
            {"bytes", image.bytes},
            {"build_seconds", image.build_seconds},
            {"created_unix", image.created_unix}};
  return j.dump(2) + "\n";
}

absl::StatusOr<EnvImage> EnvImageFromJson(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(file + ": not a JSON object");
  EnvImage im;
  if (!j.contains("top") || !j["top"].is_string()) return absl::InvalidArgumentError(file + ": top: required string");
  im.top = j["top"].get<std::string>();
  if (j.contains("tag") && j["tag"].is_string()) im.tag = j["tag"].get<std::string>();
  if (j.contains("env") && j["env"].is_array()) {
    for (const json& e : j["env"]) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
        return absl::InvalidArgumentError(file + ": env: expected [name, value] pairs");
      }
      im.config.env.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  if (j.contains("workdir") && j["workdir"].is_string()) im.config.workdir = j["workdir"].get<std::string>();
  if (j.contains("user") && j["user"].is_string()) im.config.user = j["user"].get<std::string>();
  if (j.contains("shell")) im.config.shell = StringList(j["shell"]);
  if (im.config.shell.empty()) im.config.shell = {"/bin/sh", "-c"};
  if (j.contains("entrypoint")) im.config.entrypoint = StringList(j["entrypoint"]);
  if (j.contains("cmd")) im.config.cmd = StringList(j["cmd"]);
  if (j.contains("expose")) im.config.expose = StringList(j["expose"]);
  if (j.contains("labels") && j["labels"].is_object()) {
    for (const auto& [k, v] : j["labels"].items()) {
      if (v.is_string()) im.config.labels[k] = v.get<std::string>();
    }
  }
  if (j.contains("bytes") && j["bytes"].is_number_unsigned()) im.bytes = j["bytes"].get<uint64_t>();
  if (j.contains("build_seconds") && j["build_seconds"].is_number()) im.build_seconds = j["build_seconds"].get<double>();
  if (j.contains("created_unix") && j["created_unix"].is_number_integer()) {
    im.created_unix = j["created_unix"].get<int64_t>();
  }
  return im;
}

absl::StatusOr<EnvImage> EnvStore::Get(const std::string& tag) const {
  if (!IsSafeId(tag)) return absl::InvalidArgumentError("tag: bad environment tag '" + tag + "'");
  std::string file = dir_ + "/images/" + tag + "/env.json";
  auto text = ReadText(file);
  if (!text.ok()) return absl::NotFoundError("no environment tagged '" + tag + "' in " + dir_);
  ASSIGN_OR_RETURN(EnvImage im, EnvImageFromJson(*text, file));
  im.tag = tag;
  return im;
}

absl::StatusOr<std::vector<EnvImage>> EnvStore::List() const {
  std::vector<EnvImage> out;
  std::error_code ec;
  std::vector<std::string> tags;
  for (const auto& e : fs::directory_iterator(dir_ + "/images", ec)) {
    if (fs::exists(e.path() / "env.json")) tags.push_back(e.path().filename().string());
  }
  std::sort(tags.begin(), tags.end());
  for (const std::string& t : tags) {
    ASSIGN_OR_RETURN(EnvImage im, Get(t));
    out.push_back(std::move(im));
  }
  return out;
}

absl::Status EnvStore::Save(const EnvImage& image) const {
  if (!IsSafeId(image.tag)) {
    return absl::InvalidArgumentError("tag: '" + image.tag + "' is not a tag (a-z, 0-9, '-', '_', '.')");
  }
  std::string d = dir_ + "/images/" + image.tag;
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec) return absl::InternalError("mkdir " + d + ": " + ec.message());
  RETURN_IF_ERROR(WriteAtomically(d + "/layer", image.top + "\n"));
  return WriteAtomically(d + "/env.json", EnvImageToJson(image));
}

absl::Status EnvStore::Remove(const std::string& tag) const {
  if (!IsSafeId(tag)) return absl::InvalidArgumentError("tag: bad environment tag '" + tag + "'");
  std::string d = dir_ + "/images/" + tag;
  std::error_code ec;
  if (!fs::exists(d + "/env.json", ec)) return absl::NotFoundError("no environment tagged '" + tag + "' in " + dir_);
  fs::remove_all(d, ec);
  if (ec) return absl::InternalError("removing " + d + ": " + ec.message());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> EnvStore::Chain(const std::string& top) const {
  std::vector<std::string> out;
  std::string cur = top;
  for (int depth = 0; depth < 64; ++depth) {
    out.push_back(cur);
    if (!absl::StartsWith(cur, "sha256:")) return out;
    auto parent = ReadText(dir_ + "/layers/" + cur.substr(7) + "/parent");
    if (!parent.ok()) return absl::NotFoundError("layer " + cur + " is missing from " + dir_ + "/layers");
    cur = std::string(absl::StripAsciiWhitespace(*parent));
  }
  return absl::FailedPreconditionError("layer chain of " + top + " is deeper than 64");
}

absl::StatusOr<PruneReport> EnvStore::Prune(bool bases) const {
  PruneReport r;
  std::set<std::string> reached;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/images", ec)) {
    auto top = ReadText((e.path() / "layer").string());
    if (!top.ok()) continue;
    auto chain = Chain(std::string(absl::StripAsciiWhitespace(*top)));
    if (!chain.ok()) continue;  // a broken image keeps nothing alive
    reached.insert(chain->begin(), chain->end());
  }
  for (const auto& e : fs::directory_iterator(dir_ + "/layers", ec)) {
    std::string hex = e.path().filename().string();
    if (hex.size() != 64 || reached.count("sha256:" + hex) > 0) continue;
    r.bytes += TreeBytes(e.path().string());
    fs::remove_all(e.path(), ec);
    r.layers += 1;
  }
  if (bases) {
    for (const auto& e : fs::directory_iterator(dir_ + "/images", ec)) {
      std::string root = (e.path() / "rootfs").string();
      if (!absl::StartsWith(e.path().filename().string(), "debian-") || !fs::is_directory(root)) continue;
      if (reached.count("dir:" + root) > 0) continue;
      r.bytes += TreeBytes(root);
      fs::remove_all(e.path(), ec);
      r.bases += 1;
    }
  }
  for (const auto& e : fs::directory_iterator(dir_ + "/envcache", ec)) {
    if (!CacheLookup(e.path().filename().string()).has_value()) {
      fs::remove(e.path(), ec);
      r.cache_entries += 1;
    }
  }
  return r;
}

std::optional<std::pair<std::string, uint64_t>> EnvStore::CacheLookup(const std::string& key) const {
  auto text = ReadText(dir_ + "/envcache/" + key);
  if (!text.ok()) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ');
  uint64_t bytes = 0;
  if (f.size() != 2 || !absl::SimpleAtoi(f[1], &bytes)) return std::nullopt;
  std::error_code ec;
  if (absl::StartsWith(f[0], "sha256:")) {
    if (!fs::exists(dir_ + "/layers/" + f[0].substr(7) + "/parent", ec)) return std::nullopt;
  } else if (absl::StartsWith(f[0], "dir:")) {
    if (!fs::is_directory(f[0].substr(4), ec)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return std::make_pair(f[0], bytes);
}

absl::Status EnvStore::CacheStore(const std::string& key, const std::string& layer, uint64_t bytes) const {
  std::error_code ec;
  fs::create_directories(dir_ + "/envcache", ec);
  if (ec) return absl::InternalError("mkdir " + dir_ + "/envcache: " + ec.message());
  return WriteAtomically(dir_ + "/envcache/" + key, absl::StrCat(layer, " ", bytes, "\n"));
}

}  // namespace flotilla::environments
