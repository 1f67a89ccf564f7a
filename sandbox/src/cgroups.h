// Cgroups for sandboxes, on whatever the host has: pure v2 with controllers, or v1 controller
// hierarchies (plus a v2 hierarchy without controllers, used only to attach BPF programs).
//
// CgroupDriver is detected once (Detect) and is immutable afterwards: thread-safe.
// SandboxCgroup owns one sandbox's cgroup directories and removes them when it dies.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::sandbox {

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // 0: unlimited
  uint32_t pids = 0;          // 0: unlimited
  uint32_t cpu_weight = 100;  // 1..10000
  uint32_t cpu_quota_millicores = 0;
  std::string cpus;  // cpuset CPU list ("0-3,8"); empty: not pinned
  std::string mems;  // cpuset memory nodes ("0"); empty: not pinned
};

// Counters used to tell why a process died.
struct CgroupCounters {
  uint64_t oom_kills = 0;
  uint64_t pids_max_hits = 0;
  uint64_t memory_current = 0;
};

class SandboxCgroup;

class CgroupDriver {
 public:
  // Finds the hierarchies under `root` (normally /sys/fs/cgroup). Unavailable when neither a
  // usable v2 nor v1 memory+pids+cpu+freezer is mounted.
  static absl::StatusOr<CgroupDriver> Detect(const std::string& root = "/sys/fs/cgroup");
  // A pure v2 driver over `root` taken as it is, without looking at the filesystem: for tests
  // of what limits write (a plain directory lacks cpu.weight and cpu.max exactly like a v2
  // cgroup whose parent did not delegate the cpu controller).
  static CgroupDriver PureV2At(const std::string& root, bool cpuset = false);

  bool pure_v2() const { return pure_v2_; }
  bool has_unified() const { return !unified_.empty(); }
  // Whether sandboxes can be pinned to CPUs and memory nodes (a cpuset controller).
  bool has_cpuset() const { return pure_v2_ ? v2_cpuset_ : !cpuset_.empty(); }
  std::string Describe() const;
  // The cgroup v2 mount (pure v2, or the hybrid host's unified one); empty when none.
  const std::string& v2_mount() const { return unified_; }

  // Creates (if needed) the group directory `group` (e.g. "flotilla/i1234") everywhere.
  absl::Status EnsureGroup(const std::string& group) const;
  // Creates <group>/<name> with limits: Make, then Limit.
  absl::StatusOr<std::unique_ptr<SandboxCgroup>> Create(const std::string& group, const std::string& name,
                                                       const CgroupLimits& limits) const;
  // Creates <group>/<name> in every hierarchy a sandbox always joins (v1: memory, pids,
  // freezer and the unified v2 one; else the v2 one), with no limits yet: a few mkdirs, the
  // dearest part of a sandbox's cgroups, which a runtime can do ahead of the Create.
  absl::StatusOr<std::unique_ptr<SandboxCgroup>> Make(const std::string& group, const std::string& name) const;
  // Sets `limits` on a group from Make (adding the v1 cpu and cpuset groups when they ask for
  // them). On failure the caller drops the group, which removes it.
  absl::Status Limit(SandboxCgroup& cgroup, const CgroupLimits& limits) const;
  // Kills every process in <group> and its sub-groups and removes the directories. Returns the
  // number of processes killed and cgroups removed.
  void RemoveGroup(const std::string& group, int* killed, int* removed) const;
  // Removes <group> in every hierarchy where it is empty; one in use (by another runtime
  // sharing the prefix) stays. Never blocks.
  void RemoveIfEmpty(const std::string& group) const;
  // Lists the sub-directories of <group> (in the first hierarchy).
  std::vector<std::string> ListGroup(const std::string& group) const;

 private:
  friend class SandboxCgroup;
  static std::vector<std::string> ListGroupAt(const std::string& dir);
  bool pure_v2_ = false;
  std::string v2_;        // pure v2 mount
  std::string unified_;   // v2 mount used for BPF only (hybrid) or == v2_
  std::string memory_, pids_, cpu_, freezer_, cpuset_;  // v1 mounts
  bool v2_cpuset_ = false;  // the v2 hierarchy offers the cpuset controller

  // Makes <cpuset_>/<group>, each new level inheriting its parent's CPUs and memory nodes
  // (a v1 cpuset with empty ones takes no tasks).
  absl::Status EnsureCpusetGroup(const std::string& group) const;
};

// Moving a task into a cgroup (a sandbox's init joining its groups) takes the kernel's global
// cgroup thread-group lock for writing, which by default first waits out an RCU grace period:
// 5-20 ms on an idle virtual machine, the largest single cost of starting a sandbox. The
// cgroup v2 option "favordynmods" (Linux 6.0+) keeps that lock ready for writers instead, for
// every hierarchy, at the price of slightly dearer fork and exit. Sets it on the v2 superblock
// at `v2_mount` when it is not set yet, keeping its other options. Returns whether it is on;
// false (with no change) where the kernel does not know the option.
absl::StatusOr<bool> FavorCgroupMigrations(const std::string& v2_mount);

class SandboxCgroup {
 public:
  ~SandboxCgroup();
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;

  // "cgroup.procs" files the sandbox's init writes "0" into to join (before it unshares its
  // cgroup namespace).
  const std::vector<std::string>& procs_files() const { return procs_files_; }
  // The v2 directory (for BPF attachment), empty when the host has none.
  const std::string& unified_dir() const { return unified_dir_; }

  [[nodiscard]] CgroupCounters Counters() const;
  // Whether no process is in the cgroup in any hierarchy (false when one cannot be read).
  [[nodiscard]] bool Empty() const;
  absl::Status Freeze(bool frozen);
  // SIGKILLs every process in the cgroup (thawing first). Returns how many were signalled.
  int KillAll();
  // Removes the directories now; retried briefly while the kernel still holds tasks.
  absl::Status Remove();

 private:
  friend class CgroupDriver;
  SandboxCgroup() = default;
  // Makes <root><rel_> and records it.
  absl::StatusOr<std::string> MakeIn(const std::string& root);
  bool pure_v2_ = false;
  std::string group_, rel_;  // "<group>", "/<group>/<name>"
  std::vector<std::string> dirs_;  // every directory, removed in reverse order
  std::vector<std::string> procs_files_;
  std::string unified_dir_, memory_dir_, pids_dir_, freezer_dir_;
  bool removed_ = false;
};

}  // namespace flotilla::sandbox
