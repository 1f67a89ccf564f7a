// The declarative sandbox policy: one value that every enforcer compiles from.
//
//   ASSIGN_OR_RETURN(Policy p, LoadPolicy("default"));          // a shipped policy by name
//   ASSIGN_OR_RETURN(Policy p, LoadPolicy("/path/to/mine.yaml"));  // or a file
//
// YAML schema (every key optional; unknown keys are rejected with "file:line: field: ..."):
//
//   name: default
//   execution_class: best_effort            # latency_sensitive | best_effort
//   filesystem:
//     read_only:  [/usr, /etc]               # absolute in-sandbox paths
//     read_write: [/tmp, /work]
//     hidden:     [/etc/shadow]
//   network:                                 # default deny: only what `allow` names passes
//     allow:
//       - cidr: 10.0.0.0/8                   # IPv4 or IPv6; a bare address is /32 or /128
//         ports: [443, "8000-8100"]          # absent = every port
//       - list: package_mirrors              # a named address list, resolved at load time
//         ports: [80, 443]
//     deny_lists: [package_mirrors]          # named lists that win over every allow rule
//   syscalls:
//     base: docker_default                   # docker_default | none
//     deny: [chroot]                         # denied on top of the base list
//     allow: [ptrace]                        # taken off the base list
//   resources:
//     memory: 2G
//     pids: 512
//     cpu_weight: 100                        # cgroup cpu.weight, 1..10000
//     cpu_quota: 1.5                         # CPUs; 0 = unlimited
//     disk: 10G                              # writable-layer size
//     exec_timeout: 10m
//     sandbox_timeout: 2h
//     output_limit: 16M                      # per exec, stdout+stderr
//
// Named lists: `package_mirrors` = the hosts named in the machine's apt sources
// (<apt_root>/etc/apt/sources.list, sources.list.d/*.list and *.sources), each resolved to its
// addresses by name lookup when the policy is loaded (a host that does not resolve is skipped
// and listed in NetworkPolicy::unresolved_hosts). `loopback` = 127.0.0.0/8 and ::1/128.
// Loading does name lookups: load a policy once and reuse the value, not once per sandbox.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/common/config.h"

namespace flotilla::policies {

enum class ExecutionClass { kLatencySensitive, kBestEffort };
std::string_view ExecutionClassName(ExecutionClass c);

// An address prefix. IPv4 is stored as an IPv4-mapped IPv6 address (::ffff:a.b.c.d) with
// prefix_len counted over 128 bits, so one table serves both families.
struct Cidr {
  std::array<uint8_t, 16> addr{};  // network byte order, host bits zeroed
  uint8_t prefix_len = 0;          // 0..128 over the mapped form
  bool ipv4 = false;

  // "10.0.0.0/8", "192.168.1.1", "2001:db8::/32", "::1". Host bits must be zero.
  static absl::StatusOr<Cidr> Parse(std::string_view text);
  // True when `other` lies inside this prefix.
  [[nodiscard]] bool Contains(const Cidr& other) const;
  [[nodiscard]] std::string ToString() const;
  friend bool operator==(const Cidr&, const Cidr&) = default;
};

// An inclusive port range; {0, 65535} means every port.
struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 65535;
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

struct NetworkRule {
  Cidr cidr;
  std::vector<PortRange> ports;  // never empty; {{0, 65535}} for every port
};

struct FilesystemPolicy {
  std::vector<std::string> read_only;   // normalized absolute paths
  std::vector<std::string> read_write;
  std::vector<std::string> hidden;
};

struct NetworkPolicy {
  std::vector<NetworkRule> allow;       // named lists in allow rules already expanded
  std::vector<Cidr> deny;               // from deny_lists, expanded; deny wins over allow
  std::vector<std::string> deny_lists;  // the names, for display
  // Host names of named lists that did not resolve at load time (skipped, and logged).
  std::vector<std::string> unresolved_hosts;
  // deny_lists not resolved yet (PolicyLoadOptions::defer_moot_deny_lists): `deny` is empty
  // until ResolvePendingDenyLists runs.
  bool deny_pending = false;
};

// True when every allow rule lies in loopback (127.0.0.0/8, ::1): in a sandbox's own network
// namespace such rules reach only the sandbox itself, so no deny rule can change anything.
bool OnlyLoopbackAllowed(const NetworkPolicy& net);


struct SyscallPolicy {
  // Syscall names denied with EPERM (counted). Argument-filtered syscalls (clone, unshare,
  // personality, ioctl TIOCSTI, clone3 -> ENOSYS) are governed by the flags below.
  std::vector<std::string> deny;
  bool deny_namespace_flags = true;   // clone/unshare with CLONE_NEW*; clone3 -> ENOSYS
  bool deny_personality = true;       // personality() other than the default domains
  bool deny_tiocsti = true;           // ioctl(fd, TIOCSTI, ...)
};

// Upper bounds the parser enforces, so that every figure fits the runtime's 32-bit fields and
// the kernel's own limits (a larger one is an error naming the field, never a silent wrap).
inline constexpr int64_t kMaxPids = 4'194'304;                 // the kernel's largest pid_max
inline constexpr double kMaxCpuQuota = 10'000;                 // CPUs
inline constexpr int64_t kMaxTimeoutMs = 49ll * 24 * 3600 * 1000;  // 49 days, under 2^32 ms

struct ResourcePolicy {
  uint64_t memory_bytes = 0;         // 0 = unlimited
  int64_t pids = 0;                  // 0 = unlimited
  int64_t cpu_weight = 100;          // 1..10000
  double cpu_quota = 0;              // CPUs; 0 = unlimited
  uint64_t disk_bytes = 0;           // writable layer; 0 = unlimited
  int64_t exec_timeout_ms = 0;       // 0 = none
  int64_t sandbox_timeout_ms = 0;    // 0 = none
  uint64_t output_limit_bytes = 0;   // 0 = unlimited
};

// A fully resolved policy: plain data, cheap to copy, safe to share read-only across threads.
struct Policy {
  std::string name;
  std::string source;  // file path or "builtin:<name>.yaml"
  ExecutionClass execution_class = ExecutionClass::kBestEffort;
  FilesystemPolicy filesystem;
  NetworkPolicy network;
  SyscallPolicy syscalls;
  ResourcePolicy resources;

  // A stable digest of everything the enforcers compile from; equal policies, equal digests.
  [[nodiscard]] std::string Fingerprint() const;
};

struct PolicyLoadOptions {
  // Root under which etc/apt/sources.list{,.d} are read for `package_mirrors` ("/" = this host).
  std::string apt_root = "/";
  // Leave `deny_lists` unresolved (NetworkPolicy::deny_pending) when OnlyLoopbackAllowed: the
  // name lookups of package_mirrors then cost nothing until a caller widens the allow rules
  // and calls ResolvePendingDenyLists.
  bool defer_moot_deny_lists = false;
};

// Resolves the deny lists left pending by defer_moot_deny_lists (no-op otherwise).
absl::Status ResolvePendingDenyLists(NetworkPolicy* net, const PolicyLoadOptions& options = {});

// The Docker-default-style base deny list (syscall names without argument filters).
const std::vector<std::string>& DockerDefaultDenyList();

// Parses a policy document; `file` names it in errors. Errors are InvalidArgument and read
// "policy.yaml:12: network.allow[2].cidr: bad CIDR '10.0.0/33'".
absl::StatusOr<Policy> ParsePolicy(const ConfigNode& root, const PolicyLoadOptions& options = {});
absl::StatusOr<Policy> ParsePolicyText(std::string_view yaml, std::string_view file,
                                       const PolicyLoadOptions& options = {});
absl::StatusOr<Policy> LoadPolicyFile(const std::string& path, const PolicyLoadOptions& options = {});
// A shipped policy by name ("default", "no-network", "build"), or a file when `name_or_path`
// contains '/' or ends in ".yaml". NotFound for an unknown name.
absl::StatusOr<Policy> LoadPolicy(std::string_view name_or_path, const PolicyLoadOptions& options = {});
// Names of the shipped policies (embedded in the library at build time).
std::vector<std::string> BuiltinPolicyNames();

// The host names in an apt configuration, deduplicated, in file order.
absl::StatusOr<std::vector<std::string>> AptSourceHosts(const std::string& apt_root = "/");
// A named address list ("package_mirrors", "loopback"), resolved now. NotFound for unknown
// names. A host name that does not resolve is Unavailable, or, when `unresolved` is given,
// appended there and skipped.
absl::StatusOr<std::vector<Cidr>> ResolveNamedList(std::string_view name, const PolicyLoadOptions& options = {},
                                                   std::vector<std::string>* unresolved = nullptr);

// "CIDR:PORT", "CIDR:LO-HI", "CIDR" (every port), "[v6addr/len]:PORT" — the --allow flag syntax.
absl::StatusOr<NetworkRule> ParseAllowFlag(std::string_view text);

}  // namespace flotilla::policies
