// BuildImage: a Debian root filesystem made by debootstrap, from the mirror and suite that
// the machine's own apt configuration names.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/runtime.h"
#include "sys_util.h"

namespace flotilla::sandbox {
namespace {

struct AptSource {
  std::string uri;
  std::vector<std::string> suites;
  std::string keyring;
};

// One-line ("deb [signed-by=...] URI suite comp...") and deb822 (.sources) entries.
std::vector<AptSource> ReadAptSources(const std::string& root) {
  std::vector<AptSource> out;
  std::vector<std::string> files = {root + "/etc/apt/sources.list"};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/etc/apt/sources.list.d", ec)) {
    std::string p = e.path().string();
    if (absl::EndsWith(p, ".list") || absl::EndsWith(p, ".sources")) files.push_back(p);
  }
  for (const std::string& file : files) {
    auto text = ReadSmallFile(file);
    if (!text.ok()) continue;
    if (absl::EndsWith(file, ".sources")) {
      for (absl::string_view para : absl::StrSplit(*text, "\n\n")) {
        AptSource s;
        bool deb = false;
        for (absl::string_view line : absl::StrSplit(para, '\n')) {
          if (absl::StartsWith(line, "#")) continue;
          size_t c = line.find(':');
          if (c == absl::string_view::npos) continue;
          std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, c)));
          std::string val(absl::StripAsciiWhitespace(line.substr(c + 1)));
          if (key == "types") {
            for (absl::string_view t : absl::StrSplit(val, ' ', absl::SkipEmpty())) deb = deb || t == "deb";
          }
          if (key == "uris") s.uri = std::vector<std::string>(absl::StrSplit(val, ' ', absl::SkipEmpty())).front();
          if (key == "suites") s.suites = absl::StrSplit(val, ' ', absl::SkipEmpty());
          if (key == "signed-by") s.keyring = val;
        }
        if (deb && !s.uri.empty()) out.push_back(s);
      }
      continue;
    }
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 3 || f[0] != "deb") continue;
      size_t i = 1;
      AptSource s;
      if (absl::StartsWith(f[1], "[")) {
        for (; i < f.size(); ++i) {
          if (absl::StartsWith(f[i], "signed-by=") || absl::StartsWith(f[i], "[signed-by=")) {
            s.keyring = std::string(absl::StripSuffix(f[i].substr(f[i].find('=') + 1), "]"));
          }
          if (absl::EndsWith(f[i], "]")) {
            ++i;
            break;
          }
        }
      }
      if (i + 1 >= f.size()) continue;
      s.uri = f[i];
      s.suites = {f[i + 1]};
      out.push_back(s);
    }
  }
  return out;
}

std::string HostSuite() {
  auto os = ReadSmallFile("/etc/os-release");
  if (!os.ok()) return "";
  std::istringstream in(*os);
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "VERSION_CODENAME=")) return std::string(absl::StripAsciiWhitespace(line.substr(17)));
  }
  return "";
}

// Runs argv, passing each output line to `progress`. Returns the exit status.
absl::StatusOr<int> RunWithProgress(const std::vector<std::string>& argv,
                                    const std::function<void(std::string_view)>& progress) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string pending;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      if (progress) progress(std::string_view(pending).substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const AptSource* SourceFor(const std::vector<AptSource>& sources, const std::string& suite) {
  for (const AptSource& s : sources) {
    for (const std::string& su : s.suites) {
      if (su == suite) return &s;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::string> DebianMirrorFor(const std::string& suite) {
  std::vector<AptSource> sources = ReadAptSources("");
  const AptSource* s = SourceFor(sources, suite);
  if (s == nullptr) return absl::NotFoundError("suite: no apt source of this machine serves '" + suite + "'");
  return s->uri;
}

absl::Status BuildImage(const std::string& state_dir, const std::string& name, const std::string& suite_in,
                        const std::function<void(std::string_view)>& progress) {
  if (!IsSafeId(name)) return absl::InvalidArgumentError("name: bad image name '" + name + "'");
  if (::geteuid() != 0) return absl::PermissionDeniedError("building an image needs root (debootstrap)");
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) {
    return absl::FailedPreconditionError("debootstrap is not installed (scripts/install-deps.sh installs it)");
  }
  std::string suite = suite_in.empty() ? HostSuite() : suite_in;
  if (suite.empty()) return absl::InvalidArgumentError("suite: none given and the host's is unknown");
  std::vector<AptSource> sources = ReadAptSources("");
  const AptSource* chosen = SourceFor(sources, suite);
  if (!chosen) return absl::NotFoundError("suite: no apt source of this machine serves '" + suite + "'");
  const std::string dir = state_dir + "/images/" + name;
  std::error_code ec;
  if (std::filesystem::exists(dir + "/rootfs", ec)) return absl::AlreadyExistsError("image '" + name + "' exists");
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("mkdir " + dir + ": " + ec.message());
  const std::string tmp = dir + "/rootfs.partial";
  RemoveTree(tmp);
  std::vector<std::string> argv = {"/usr/sbin/debootstrap", "--variant=minbase"};
  if (!chosen->keyring.empty()) argv.push_back("--keyring=" + chosen->keyring);
  argv.insert(argv.end(), {suite, tmp, chosen->uri});
  if (progress) progress("debootstrap " + suite + " from " + chosen->uri);
  ASSIGN_OR_RETURN(int rc, RunWithProgress(argv, progress));
  if (rc != 0) {
    RemoveTree(tmp);
    return absl::InternalError("debootstrap exited with status " + std::to_string(rc));
  }
  if (::rename(tmp.c_str(), (dir + "/rootfs").c_str()) != 0) return ErrnoStatus("rename image rootfs");
  return absl::OkStatus();
}

}  // namespace flotilla::sandbox
