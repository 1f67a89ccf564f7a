#include "host_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace flotilla::attack {
namespace {

std::vector<pid_t> AllPids() {
  std::vector<pid_t> pids;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return pids;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(dir);
  return pids;
}

}  // namespace

std::string NamespaceLink(pid_t pid, const std::string& kind) {
  std::string path = (pid == 0 ? std::string("/proc/self") : "/proc/" + std::to_string(pid)) + "/ns/" + kind;
  char buf[128];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string DeviceInode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

std::vector<pid_t> ProcessesInPidNamespace(const std::string& pid_ns_link) {
  std::vector<pid_t> found;
  if (pid_ns_link.empty()) return found;
  for (pid_t pid : AllPids()) {
    if (NamespaceLink(pid, "pid") == pid_ns_link) found.push_back(pid);
  }
  return found;
}

NamespacePins::NamespacePins(pid_t pid, const std::vector<std::string>& kinds) {
  for (const std::string& kind : kinds) {
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + kind;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      ok_ = false;
      continue;
    }
    fds_.emplace_back(kind, fd);
  }
}

NamespacePins::~NamespacePins() {
  for (const auto& [kind, fd] : fds_) ::close(fd);
}

std::string NamespacePins::Link(const std::string& kind) const {
  for (const auto& [pinned, fd] : fds_) {
    if (pinned != kind) continue;
    char buf[128];
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
    return n <= 0 ? "" : std::string(buf, static_cast<size_t>(n));
  }
  return "";
}

pid_t InitOfPidNamespace(const std::string& pid_ns_link) {
  for (pid_t pid : ProcessesInPidNamespace(pid_ns_link)) {
    std::istringstream status(ReadHostFile("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream ids(line.substr(6));
      std::string id, last;
      while (ids >> id) last = id;
      if (last == "1") return pid;
    }
  }
  return 0;
}

std::vector<pid_t> ProcessesInCgroupsNamed(const std::string& needle) {
  std::vector<pid_t> found;
  for (pid_t pid : AllPids()) {
    if (pid == ::getpid()) continue;
    std::istringstream cgroups(ReadHostFile("/proc/" + std::to_string(pid) + "/cgroup"));
    std::string line;
    while (std::getline(cgroups, line)) {
      // "<id>:<controllers>:<path>": only the path may name a sandbox cgroup.
      size_t colon = line.find(':', line.find(':') + 1);
      if (colon != std::string::npos && line.find(needle, colon) != std::string::npos) {
        found.push_back(pid);
        break;
      }
    }
  }
  return found;
}

std::string ReadHostFile(const std::string& path, bool* ok) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ok != nullptr) *ok = fd >= 0;
  if (fd < 0) return out;
  char buf[8192];
  while (out.size() < (1u << 20)) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) {
      if (n < 0 && ok != nullptr) *ok = false;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<std::string> MountsContaining(const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream mounts(ReadHostFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

int RunOnHost(const std::vector<std::string>& argv, std::string* out) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2] = {-1, -1};
  if (out != nullptr && ::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(out != nullptr ? pipefd[1] : null, 1);
    ::dup2(null, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (out != nullptr) {
    ::close(pipefd[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string HostIPv4() {
  ifaddrs* addrs = nullptr;
  if (::getifaddrs(&addrs) != 0) return "";
  std::string found;
  for (ifaddrs* a = addrs; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  ::freeifaddrs(addrs);
  return found;
}

HostListener::HostListener(Kind kind, const std::string& address) : kind_(kind) {
  int fd = ::socket(AF_INET, (kind == Kind::kTcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof(addr);
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (kind == Kind::kTcp && ::listen(fd, 16) != 0) ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  port_ = ntohs(addr.sin_port);
}

HostListener::~HostListener() {
  if (fd_ >= 0) ::close(fd_);
}

bool HostListener::ReceivedAnything(int wait_ms) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, wait_ms) != 1) return false;
  if (kind_ == Kind::kTcp) {
    int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn >= 0) ::close(conn);
    return true;
  }
  char buf[512];
  return ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT) >= 0;
}

HostSleeper::HostSleeper() {
  pid_ = ::fork();
  if (pid_ == 0) {
    for (;;) ::pause();
  }
}

HostSleeper::~HostSleeper() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool HostSleeper::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped_ = true;
  return r == 0;
}

}  // namespace flotilla::attack
