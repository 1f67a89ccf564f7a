// eBPF network enforcement per sandbox cgroup.
//
// One NetworkEnforcer per process loads the BPF programs (cgroup/connect4, connect6, sendmsg4,
// sendmsg6) and their maps once, or takes the node's pinned copy (Options::pin_dir). Attaching a sandbox writes its rules into a shared LPM trie
// keyed by (cgroup id, address prefix) and links the four programs to the sandbox's cgroup v2
// directory, which takes microseconds, not a program load.
//
// Semantics: default deny. A connect() or an addressed sendmsg() from any task in the
// cgroup passes only when the destination address matches an allow rule's prefix and the
// destination port is in that rule's ports, and no deny prefix contains it; otherwise the
// syscall fails with EPERM and the sandbox's denial counter goes up. IPv4-mapped IPv6
// destinations are judged as IPv4. Tasks in descendant cgroups are judged by the programs
// too but find no rules of their own, so everything is denied to them (fail closed).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/policies/policy.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::policies {

// Where the cgroup v2 hierarchy is mounted on this host: "/sys/fs/cgroup" on a pure v2 host,
// "/sys/fs/cgroup/unified" on a hybrid one; NotFound when there is none. Read from
// /proc/self/mountinfo.
absl::StatusOr<std::string> FindCgroup2Mount();

class NetworkEnforcer;

// One sandbox's attachment: owns the four BPF links and the sandbox's entries in the rule
// map. Destruction detaches the links and deletes the entries. Must not outlive its
// enforcer. Thread-safe reads.
class NetworkAttachment {
 public:
  ~NetworkAttachment();
  NetworkAttachment(const NetworkAttachment&) = delete;
  NetworkAttachment& operator=(const NetworkAttachment&) = delete;

  [[nodiscard]] uint64_t cgroup_id() const { return cgroup_id_; }
  // connect/sendmsg calls denied so far (from the BPF counter map).
  [[nodiscard]] uint64_t denials() const;
  // Number of rule-map entries written for this sandbox.
  [[nodiscard]] size_t rule_count() const { return rule_count_; }
  // Kernel ids of the BPF links (to check from outside that they are gone after destruction).
  [[nodiscard]] std::vector<uint32_t> link_ids() const;

 private:
  friend class NetworkEnforcer;
  NetworkAttachment(NetworkEnforcer* owner, uint64_t cgroup_id) : owner_(owner), cgroup_id_(cgroup_id) {}

  NetworkEnforcer* owner_;
  uint64_t cgroup_id_;
  size_t rule_count_ = 0;
  std::vector<std::vector<uint8_t>> keys_;  // rule-map keys written for this sandbox
  std::vector<UniqueFd> links_;
  bool counter_created_ = false;
};

// Owns the loaded BPF object (programs and maps). Thread-safe: Attach and detach may run
// from many threads at once.
class NetworkEnforcer {
 public:
  struct Options {
    uint32_t max_rules = 65536;  // entries in the shared LPM trie, across all sandboxes
    // Keep the kernel's cgroup hooks switched on for the enforcer's lifetime by attaching the
    // programs to an empty cgroup "<cgroup2>/flotilla-netpolicy-anchor.<pid>" (removed on
    // destruction; stale ones of dead processes are removed by Create). Without it every
    // attach/detach that switches a hook on or off costs milliseconds of kernel code patching.
    bool keep_hooks_warm = true;
    // Non-empty: use the node's shared copy of the programs pinned under this directory (a
    // bpffs of flotilla's own, mounted there if needed), loading and pinning it only when no
    // earlier process did. Its pinned anchor keeps the hooks on across processes (so
    // keep_hooks_warm is moot), and a short-lived process skips the program load altogether.
    // Where no bpffs can be mounted, the programs load for this process instead.
    std::string pin_dir;
  };
  // Takes the node's shared copy under `pin_dir` away (pins, anchor cgroups, the bpffs mount).
  // Processes using it keep their objects; the next pinning Create makes a new copy.
  static absl::Status RemovePinned(const std::string& pin_dir);
  // Loads the programs. FailedPrecondition / PermissionDenied (with the reason) where the
  // kernel or privileges do not allow it.
  static absl::StatusOr<std::unique_ptr<NetworkEnforcer>> Create(const Options& options);
  static absl::StatusOr<std::unique_ptr<NetworkEnforcer>> Create() { return Create(Options{}); }
  ~NetworkEnforcer();
  NetworkEnforcer(const NetworkEnforcer&) = delete;
  NetworkEnforcer& operator=(const NetworkEnforcer&) = delete;

  // Attaches `policy` to the cgroup v2 directory `cgroup_dir_fd` (an O_RDONLY|O_DIRECTORY fd
  // of a directory under FindCgroup2Mount()). The fd is not kept.
  absl::StatusOr<std::unique_ptr<NetworkAttachment>> Attach(const NetworkPolicy& policy,
                                                           int cgroup_dir_fd);

  // Deletes the rule and counter entries of cgroups that no longer exist (left in the shared
  // maps by a process that died attached). One syscall pair per live entry: run it off the
  // path of a Create. Returns how many cgroups' entries went. Safe beside Attach and detach;
  // stops early (the rest left for a later pass) once *stop turns true.
  int PurgeDeadCgroups(const std::atomic<bool>* stop = nullptr);

 private:
  friend class NetworkAttachment;
  struct Impl;
  explicit NetworkEnforcer(std::unique_ptr<Impl> impl);
  void Detach(NetworkAttachment* attachment);
  uint64_t Denials(uint64_t cgroup_id) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::policies
