#include "deb_cache.h"

#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/text_files.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

// Runs a host shell command; its exit status and output.
std::pair<int, std::string> Shell(const std::string& script) {
  std::string out;
  FILE* p = ::popen(absl::StrCat("/bin/sh -c ", ShellQuote(script), " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace

absl::StatusOr<std::string> FetchDebs(const std::vector<std::string>& packages, const std::string& base_rootfs,
                                      const std::string& cache_root) {
  std::vector<std::string> quoted;
  for (const std::string& p : packages) quoted.push_back(ShellQuote(p));
  std::string key = absl::StrJoin(packages, "+");
  for (char& c : key) c = (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.') ? c : '_';
  fs::path dir = fs::path(cache_root) / absl::StrCat(fs::path(base_rootfs).parent_path().filename().string(), "-", key);
  std::error_code ec;
  if (fs::exists(dir / ".complete", ec)) return dir.string();
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir.string(), ": ", ec.message()));
  std::string script = absl::StrCat(
      "set -e; cd ", ShellQuote(dir.string()), "; ",
      "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces "
      "--no-enhances ", absl::StrJoin(quoted, " "), " | grep -v '^ ' | grep -v '^<' | sort -u > closure.txt; ",
      // Name=version pairs: a package the base has at another version (a security update) is needed too.
      "apt-cache show --no-all-versions $(cat closure.txt) | awk '/^Package:/{p=$2} /^Version:/{print p \"=\" $2}' "
      "| sort -u > want.txt; ",
      "awk '/^Package:/{p=$2} /^Version:/{print p \"=\" $2}' ", ShellQuote(base_rootfs + "/var/lib/dpkg/status"),
      " | sort -u > base.txt; ",
      "comm -23 want.txt base.txt | cut -d= -f1 | sort -u > needed.txt; ",
      "apt-get download -q $(cat needed.txt) >download.log 2>&1 || { cat download.log; exit 1; }; ",
      "touch .complete");
  auto [status, out] = Shell(script);
  if (status != 0) {
    return absl::FailedPreconditionError(absl::StrCat("fetching Debian packages ", absl::StrJoin(packages, " "),
                                                      " for the environment: ", out.substr(0, 2000)));
  }
  return dir.string();
}

absl::Status LinkDebs(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  for (const auto& e : fs::directory_iterator(from, ec)) {
    if (e.path().extension() != ".deb") continue;
    fs::path dst = fs::path(to) / e.path().filename();
    if (fs::exists(dst, ec)) continue;
    fs::create_hard_link(e.path(), dst, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(e.path(), dst, ec);
    }
    if (ec) return absl::InternalError(absl::StrCat(dst.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::synth
