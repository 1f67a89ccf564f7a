#include "base_images.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/runtime.h"
#include "hashing.h"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;

const char* SuiteOfMajor(std::string_view major) {
  if (major == "11") return "bullseye";
  if (major == "12") return "bookworm";
  if (major == "13") return "trixie";
  return nullptr;
}

bool IsDate(std::string_view s) {
  if (s.size() != 8) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

std::optional<std::string> DebianSuiteOfTag(std::string tag) {
  if (tag.empty() || tag == "latest" || tag == "stable" || tag == "stable-slim") return std::string("trixie");
  if (absl::EndsWith(tag, "-slim")) tag.resize(tag.size() - 5);
  // "<suite>-<date>" and "<major>.<minor>"
  if (size_t dash = tag.rfind('-'); dash != std::string::npos && IsDate(tag.substr(dash + 1))) tag = tag.substr(0, dash);
  for (const char* s : {"bullseye", "bookworm", "trixie"}) {
    if (tag == s) return tag;
  }
  std::string major = tag.substr(0, tag.find('.'));
  if (const char* s = SuiteOfMajor(major)) {
    std::string minor = tag.find('.') == std::string::npos ? "0" : tag.substr(tag.find('.') + 1);
    int m = 0;
    if (absl::SimpleAtoi(minor, &m)) return std::string(s);
  }
  return std::nullopt;
}

}  // namespace

std::optional<BaseSpec> KnownBase(const std::string& name_in) {
  absl::string_view view = name_in;
  absl::ConsumePrefix(&view, "docker.io/");
  absl::ConsumePrefix(&view, "library/");
  std::string name(view);
  std::string repo = name.substr(0, name.find(':'));
  std::string tag = name.find(':') == std::string::npos ? "" : name.substr(name.find(':') + 1);
  if (repo == "debian") {
    auto suite = DebianSuiteOfTag(tag);
    if (!suite) return std::nullopt;
    return BaseSpec{.suite = *suite, .packages = {}, .pip_system_wide = false};
  }
  if (repo == "python") {
    absl::string_view tv = tag;
    absl::ConsumeSuffix(&tv, "-bookworm");
    absl::ConsumeSuffix(&tv, "-slim");
    std::string t(tv);
    if (t != "3.11" && !absl::StartsWith(t, "3.11.")) return std::nullopt;
    return BaseSpec{.suite = "bookworm",
                    .packages = {"python3", "python3-pip", "python3-venv", "python-is-python3"},
                    .pip_system_wide = true};
  }
  if (repo == "buildpack-deps") {
    std::vector<std::string> curl = {"ca-certificates", "curl", "wget", "gnupg"};
    std::vector<std::string> scm = curl;
    scm.insert(scm.end(), {"git", "openssh-client", "procps"});
    std::vector<std::string> full = scm;
    full.insert(full.end(), {"build-essential", "autoconf", "automake", "libtool", "pkg-config"});
    if (tag == "bookworm-curl") return BaseSpec{.suite = "bookworm", .packages = curl, .pip_system_wide = false};
    if (tag == "bookworm-scm") return BaseSpec{.suite = "bookworm", .packages = scm, .pip_system_wide = false};
    if (tag == "bookworm") return BaseSpec{.suite = "bookworm", .packages = full, .pip_system_wide = false};
  }
  return std::nullopt;
}

std::string BaseSetupCommand(const BaseSpec& spec) {
  std::string cmd;
  if (!spec.packages.empty()) {
    cmd = absl::StrCat("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ",
                       absl::StrJoin(spec.packages, " "), " && apt-get clean && rm -rf /var/lib/apt/lists/*");
  }
  if (spec.pip_system_wide) absl::StrAppend(&cmd, cmd.empty() ? "" : " && ", "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED");
  return cmd;
}

absl::StatusOr<BaseRoot> EnsureDebianBase(const std::string& store_dir, const std::string& suite,
                                          const std::function<void(std::string_view)>& progress) {
  ASSIGN_OR_RETURN(std::string mirror, sandbox::DebianMirrorFor(suite));
  const std::string name = absl::StrCat("debian-", suite, "-minbase-", Sha256Hex(mirror).substr(0, 12));
  const std::string dir = store_dir + "/images/" + name;
  BaseRoot out;
  out.top = "dir:" + dir + "/rootfs";
  std::error_code ec;
  fs::create_directories(store_dir + "/images", ec);
  // One debootstrap per base at a time: a second builder waits for the first one's result.
  int lock = ::open((store_dir + "/images/." + name + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return absl::InternalError("opening the base lock of " + name);
  ::flock(lock, LOCK_EX);
  auto unlock = [lock] { ::close(lock); };
  std::ifstream bytes_in(dir + "/bytes");
  if (fs::is_directory(dir + "/rootfs", ec) && (bytes_in >> out.bytes)) {
    unlock();
    return out;
  }
  fs::remove_all(dir, ec);
  absl::Status built = sandbox::BuildImage(store_dir, name, suite, progress);
  if (built.ok()) {
    // Docker mounts /etc/hosts into containers; a root filesystem of our own carries one.
    std::ofstream hosts(dir + "/rootfs/etc/hosts", std::ios::trunc);
    hosts << "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    hosts.close();
    // debootstrap leaves the downloaded packages behind; Debian's images do not carry them.
    for (const auto& e : fs::directory_iterator(dir + "/rootfs/var/cache/apt/archives", ec)) {
      if (e.path().extension() == ".deb") fs::remove(e.path(), ec);
    }
    uint64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(dir + "/rootfs", ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      struct stat st;
      if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
    }
    out.bytes = total;
    std::ofstream(dir + "/bytes") << total << "\n";
    out.built_now = true;
  }
  unlock();
  if (!built.ok()) return Annotate(built, "building the " + suite + " base with debootstrap");
  return out;
}

}  // namespace flotilla::environments
