// Host-side observations for the attack suite: what the host sees of namespaces, processes,
// cgroups, mounts and sockets while an attack runs inside a sandbox. Nothing here changes the
// host beyond the test's own sockets and child processes, which RAII values own.
//
// Thread-safety: free functions are reentrant; each class is owned by one test thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flotilla::attack {

// readlink(/proc/<pid>/ns/<kind>), e.g. "pid:[4026531836]"; empty when unreadable.
// pid 0 means this process.
std::string NamespaceLink(pid_t pid, const std::string& kind);

// "<st_dev>:<st_ino>" of a path on the host, empty when it cannot be stat'ed.
std::string DeviceInode(const std::string& path);

// Every host process whose pid namespace is `pid_ns_link` ("pid:[N]").
std::vector<pid_t> ProcessesInPidNamespace(const std::string& pid_ns_link);

// The host pid of the process that is pid 1 inside `pid_ns_link`; 0 when there is none.
pid_t InitOfPidNamespace(const std::string& pid_ns_link);

// Host pids of every process whose /proc/<pid>/cgroup names a cgroup path containing `needle`.
std::vector<pid_t> ProcessesInCgroupsNamed(const std::string& needle);

// Whole file (up to 1 MiB); empty when unreadable. `ok` (optional) tells the two apart.
std::string ReadHostFile(const std::string& path, bool* ok = nullptr);

// Lines of /proc/self/mountinfo that contain `needle`.
std::vector<std::string> MountsContaining(const std::string& needle);

// fork + execv on the host; the exit status (128+signal when killed, -1 when it cannot start).
// stdout goes to `out` when given, /dev/null otherwise; stderr always to /dev/null.
int RunOnHost(const std::vector<std::string>& argv, std::string* out = nullptr);

// The first non-loopback IPv4 address of the host ("192.0.2.2"); empty when it has none.
std::string HostIPv4();

// A listening socket on the host: TCP (listen) or UDP (bound), non-blocking, closed on death.
class HostListener {
 public:
  enum class Kind { kTcp, kUdp };
  // Binds `address` ("127.0.0.1", "0.0.0.0") on an ephemeral port; aborts the test binary
  // only through a failed gtest assertion in the caller when !ok().
  HostListener(Kind kind, const std::string& address);
  ~HostListener();
  HostListener(const HostListener&) = delete;
  HostListener& operator=(const HostListener&) = delete;

  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] uint16_t port() const { return port_; }
  // True when a connection is pending (TCP) or a datagram arrived (UDP) within `wait_ms`.
  [[nodiscard]] bool ReceivedAnything(int wait_ms);

 private:
  Kind kind_;
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A host child process that only sleeps; killed and reaped on destruction.
class HostSleeper {
 public:
  HostSleeper();
  ~HostSleeper();
  HostSleeper(const HostSleeper&) = delete;
  HostSleeper& operator=(const HostSleeper&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  // True while the child has not exited (checked with waitpid WNOHANG).
  [[nodiscard]] bool Alive();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Open descriptors on a process's namespaces (/proc/<pid>/ns/<kind>), which keep them alive
// after every process in them is gone. A dead namespace's inode number is free for the next
// one the kernel makes, so "pid:[N]" names the same namespace over time only while it is pinned.
class NamespacePins {
 public:
  // Pins each of `kinds` ("pid", "mnt", "net", ...) of `pid`; ok() is false when one could not be.
  NamespacePins(pid_t pid, const std::vector<std::string>& kinds);
  ~NamespacePins();
  NamespacePins(const NamespacePins&) = delete;
  NamespacePins& operator=(const NamespacePins&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  // The pinned namespace's link ("mnt:[N]"), read from the descriptor; empty when not pinned.
  [[nodiscard]] std::string Link(const std::string& kind) const;

 private:
  std::vector<std::pair<std::string, int>> fds_;
  bool ok_ = true;
};

}  // namespace flotilla::attack
