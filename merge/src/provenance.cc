#include "provenance.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::merge {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

absl::StatusOr<nlohmann::json> Parent(const Checkpoint& c, const std::string& role) {
  nlohmann::json files = nlohmann::json::object();
  for (const std::string& f : c.files()) {
    ASSIGN_OR_RETURN(std::string h, Sha256File(f));
    files[std::filesystem::path(f).filename().string()] = h;
  }
  return nlohmann::json{{"role", role}, {"path", c.path()}, {"sha256", files}};
}

}  // namespace

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return ErrnoStatus(absl::StrCat("open ", path));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("sha256: cannot initialise a digest");
  }
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("read ", path));
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), len));
}

absl::Status WriteProvenance(const MergeConfig& config, const Checkpoint* base,
                             const std::vector<const Checkpoint*>& models, const std::vector<std::string>& shards,
                             const std::string& out_path) {
  nlohmann::json j;
  j["method"] = MergeMethodName(config.method);
  j["config_path"] = config.file;
  j["config"] = config.text;
  j["seed"] = config.seed;
  j["parents"] = nlohmann::json::array();
  if (base != nullptr) {
    ASSIGN_OR_RETURN(nlohmann::json p, Parent(*base, "base"));
    j["parents"].push_back(std::move(p));
  }
  for (const Checkpoint* m : models) {
    ASSIGN_OR_RETURN(nlohmann::json p, Parent(*m, "model"));
    j["parents"].push_back(std::move(p));
  }
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& s : shards) {
    ASSIGN_OR_RETURN(std::string h, Sha256File(s));
    out[std::filesystem::path(s).filename().string()] = h;
  }
  j["output_sha256"] = out;
  std::ofstream f(out_path);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", out_path));
  return absl::OkStatus();
}

}  // namespace flotilla::merge
