// EnvStore: built task environments on disk, beside the sandbox runtime's image layers.
//
// Layout under the store dir (the runtime's image dir, RuntimeOptions::image_dir):
//   layers/<sha256 hex>/                 content-addressed layers (the runtime's ImageStore)
//   images/<tag>/layer                   the image's top: "sha256:<hex>" or "dir:<rootfs>"
//   images/<tag>/env.json                its config (ENV, WORKDIR, USER, SHELL, ENTRYPOINT, CMD,
//                                        EXPOSE, LABEL), size, build time; only environments
//   images/debian-<suite>-<variant>-<mirror hash>/rootfs   debootstrapped bases
//   envcache/<sha256 hex>                a build step's cache entry: "<layer id> <bytes>"
//
// A sandbox started with SandboxOptions::image = <tag> runs on the image's layers, mounted
// read-only as overlay lower layers and shared by every sandbox of the image.
//
// Thread-safety: methods touch files only; concurrent builds of different tags are safe,
// Remove and Prune while a build runs may remove what it is about to use.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::environments {

struct ImageConfig {
  std::vector<std::pair<std::string, std::string>> env;  // ENV, in the order set
  std::string workdir;                                   // empty: "/"
  std::string user;                                      // empty: root
  std::vector<std::string> shell = {"/bin/sh", "-c"};
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> expose;                      // "8080/tcp"
  std::map<std::string, std::string> labels;
};

struct EnvImage {
  std::string tag;
  std::string top;          // "sha256:<hex>" (a layer) or "dir:<path>" (a base root filesystem)
  ImageConfig config;
  uint64_t bytes = 0;       // file bytes of every layer of the image, the base included
  double build_seconds = 0;
  int64_t created_unix = 0;
};

struct PruneReport {
  int layers = 0;        // unreferenced layers removed
  int cache_entries = 0; // cache entries whose layer was gone
  int bases = 0;         // base root filesystems removed (only with bases=true)
  uint64_t bytes = 0;    // file bytes freed
};

class EnvStore {
 public:
  explicit EnvStore(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }

  // NotFound naming the tag when there is no such environment.
  absl::StatusOr<EnvImage> Get(const std::string& tag) const;
  // Every environment (images with env.json), by tag.
  absl::StatusOr<std::vector<EnvImage>> List() const;
  // Writes images/<tag>/{layer,env.json}; InvalidArgument for a tag that is not a safe id.
  absl::Status Save(const EnvImage& image) const;
  // Removes the tag (not its layers: Prune does).
  absl::Status Remove(const std::string& tag) const;
  // Removes layers no image reaches and cache entries without their layer; with `bases`,
  // debootstrapped bases no environment uses.
  absl::StatusOr<PruneReport> Prune(bool bases) const;

  // Build cache: the layer (and its bytes) a step with this key made, when it is still there.
  std::optional<std::pair<std::string, uint64_t>> CacheLookup(const std::string& key) const;
  absl::Status CacheStore(const std::string& key, const std::string& layer, uint64_t bytes) const;

  // The layers (parent chain, topmost first) under `top`; the last element may be a "dir:".
  absl::StatusOr<std::vector<std::string>> Chain(const std::string& top) const;

 private:
  std::string dir_;
};

// env.json text of an image, and back (errors name the file and field).
std::string EnvImageToJson(const EnvImage& image);
absl::StatusOr<EnvImage> EnvImageFromJson(const std::string& text, const std::string& file);

}  // namespace flotilla::environments
