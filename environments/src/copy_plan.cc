#include "copy_plan.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "hashing.h"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;

bool IsArchive(const std::string& name) {
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  return false;
}

std::string JoinDest(const std::string& dir, const std::string& rel) {
  if (rel.empty() || rel == ".") return dir;
  return absl::EndsWith(dir, "/") ? dir + rel : dir + "/" + rel;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Adds `host` (a file, directory or symlink of the context) as `dest`.
absl::Status AddPath(const fs::path& host, const std::string& dest, CopyPlan* plan, KeyHasher* key,
                     const std::string& where) {
  struct stat st;
  if (::lstat(host.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(where, ": cannot read ", host.string()));
  uint32_t mode = st.st_mode & 07777;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    std::string target = fs::read_symlink(host, ec).string();
    plan->symlinks.emplace_back(dest, target);
    key->Add(absl::StrCat("L ", dest, " ", target));
    return absl::OkStatus();
  }
  if (S_ISDIR(st.st_mode)) {
    plan->dirs.emplace_back(dest, mode);
    key->Add(absl::StrCat("D ", dest, " ", mode));
    std::vector<fs::path> entries;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(host, ec)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const fs::path& e : entries) RETURN_IF_ERROR(AddPath(e, JoinDest(dest, e.filename().string()), plan, key, where));
    return absl::OkStatus();
  }
  if (!S_ISREG(st.st_mode)) return absl::OkStatus();  // sockets, fifos, devices: Docker skips them too
  ASSIGN_OR_RETURN(std::string content, ReadFile(host.string()));
  key->Add(absl::StrCat("F ", dest, " ", mode, " ", Sha256Hex(content)));
  plan->files.push_back({.dest = dest, .source = host.string(), .inline_content = "", .mode = mode});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CopyPlan> PlanContextCopy(const std::string& context_dir, const std::vector<std::string>& sources,
                                         const std::string& dest, bool is_add, const Instruction& in,
                                         const std::string& where) {
  CopyPlan plan;
  KeyHasher key;
  key.Add(dest);
  const fs::path root = fs::absolute(context_dir).lexically_normal();
  // Every source resolved to host paths first: the destination's meaning depends on how many.
  std::vector<std::pair<fs::path, std::string>> matched;  // host path, heredoc name
  for (const std::string& src : sources) {
    if (absl::StartsWith(src, "<<")) {
      std::string name = src.substr(2);
      if (!name.empty() && name[0] == '-') name = name.substr(1);
      name.erase(std::remove(name.begin(), name.end(), '"'), name.end());
      name.erase(std::remove(name.begin(), name.end(), '\''), name.end());
      matched.emplace_back(fs::path(), name);
      continue;
    }
    if (absl::StartsWith(src, "http://") || absl::StartsWith(src, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", src,
                                                     ": fetching URLs is not supported (the build sandbox reaches only "
                                                     "this machine's apt mirrors); put the file in the build context"));
    }
    fs::path rel = fs::path(src).lexically_normal();
    if (rel.is_absolute()) rel = rel.lexically_relative("/");
    if (!rel.empty() && rel.begin()->string() == "..") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", src, " is outside the build context"));
    }
    fs::path full = (root / rel).lexically_normal();
    std::string last = full.filename().string();
    if (last.find_first_of("*?[") == std::string::npos) {
      std::error_code ec;
      if (!fs::exists(fs::symlink_status(full, ec))) {
        return absl::NotFoundError(absl::StrCat(where, ": ", src, ": no such file in the build context ", context_dir));
      }
      matched.emplace_back(full, "");
      continue;
    }
    std::vector<fs::path> hits;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(full.parent_path(), ec)) {
      if (::fnmatch(last.c_str(), e.path().filename().c_str(), FNM_PERIOD) == 0) hits.push_back(e.path());
    }
    std::sort(hits.begin(), hits.end());
    if (hits.empty()) {
      return absl::NotFoundError(absl::StrCat(where, ": ", src, ": matches no file in the build context"));
    }
    for (const fs::path& h : hits) matched.emplace_back(h, "");
  }
  const bool dest_is_dir = absl::EndsWith(dest, "/") || matched.size() > 1;
  if (matched.size() > 1 && !absl::EndsWith(dest, "/")) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": with several sources the destination must end in '/'"));
  }
  for (const auto& [host, heredoc] : matched) {
    if (!heredoc.empty()) {
      const HereDoc* h = nullptr;
      for (const HereDoc& d : in.heredocs) {
        if (d.name == heredoc) h = &d;
      }
      if (h == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": no here-document named ", heredoc));
      std::string to = dest_is_dir ? JoinDest(dest, heredoc) : dest;
      key.Add(absl::StrCat("H ", to, " ", Sha256Hex(h->body)));
      plan.files.push_back({.dest = to, .source = "", .inline_content = h->body, .mode = 0644});
      continue;
    }
    std::error_code ec;
    if (fs::is_directory(host, ec) && !fs::is_symlink(host, ec)) {
      // A directory's contents go into the destination (the directory itself is not named).
      plan.dest_dirs.push_back(dest);
      std::vector<fs::path> entries;
      for (const auto& e : fs::directory_iterator(host, ec)) entries.push_back(e.path());
      std::sort(entries.begin(), entries.end());
      for (const fs::path& e : entries) {
        RETURN_IF_ERROR(AddPath(e, JoinDest(dest, e.filename().string()), &plan, &key, where));
      }
      continue;
    }
    if (is_add && IsArchive(host.filename().string())) {
      ASSIGN_OR_RETURN(std::string content, ReadFile(host.string()));
      key.Add(absl::StrCat("A ", dest, " ", Sha256Hex(content)));
      plan.archives.emplace_back(host.string(), dest);
      continue;
    }
    plan.single_file = !dest_is_dir;
    RETURN_IF_ERROR(AddPath(host, dest_is_dir ? JoinDest(dest, host.filename().string()) : dest, &plan, &key, where));
  }
  plan.key = key.Finish();
  return plan;
}

}  // namespace flotilla::environments
