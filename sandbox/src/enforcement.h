// The seam between the runtime and the policy enforcers (policies/): resolving a sandbox's
// policy, preparing what its init applies to itself, and what the runtime attaches outside.
//
// One PolicyEnforcement per runtime (thread-safe); one SandboxEnforcement per sandbox (owned
// by the sandbox; destroying it detaches BPF links and seccomp watches).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/sandbox/runtime.h"
#include "init_process.h"

namespace flotilla::sandbox {

// What the runtime needs from a resolved policy besides the enforcers.
struct PolicyLimits {
  ExecutionClass execution_class = ExecutionClass::kBestEffort;
  bool execution_class_set = false;
  uint64_t memory_bytes = 0;
  uint32_t pids = 0;
  uint32_t cpu_weight = 0;
  uint32_t cpu_quota_millicores = 0;
  uint64_t disk_bytes = 0;
  uint32_t exec_timeout_ms = 0;
  uint32_t sandbox_timeout_ms = 0;
  uint64_t output_limit_bytes = 0;
};

class SandboxEnforcement {
 public:
  virtual ~SandboxEnforcement() = default;
  // Adds the hooks init runs on itself (Landlock, seccomp) to `plan`. Called before clone.
  virtual void AddChildHooks(InitPlan* plan) = 0;
  // Once init is cloned, while it sets itself up (and before any command can run): attaches the
  // BPF programs to the sandbox's v2 cgroup `cgroup_v2_dir` (empty: none on this host).
  virtual absl::Status AttachToCgroup(const std::string& cgroup_v2_dir) = 0;
  // After init reported ready: takes the seccomp listener init installed.
  virtual absl::Status AfterStart() = 0;
  // Before a new init starts in the same sandbox (the warm pool's reset, under `sandbox_id`):
  // a fresh channel for its seccomp listener, the old one's watch dropped. The BPF programs
  // stay attached to the cgroup; AddChildHooks then AfterStart follow as for a first start.
  virtual absl::Status Rearm(const std::string& sandbox_id) = 0;
  // Denials counted so far by every enforcer (seccomp calls, network connects).
  [[nodiscard]] virtual uint64_t Violations() const = 0;
  virtual const std::vector<std::string>& active() const = 0;
  virtual const std::vector<std::string>& inactive() const = 0;
};

class PolicyEnforcement {
 public:
  virtual ~PolicyEnforcement() = default;
  // The runtime's enforcers on this host (policies/ when linked).
  static absl::StatusOr<std::unique_ptr<PolicyEnforcement>> Create(const RuntimeOptions& options);

  // Resolves options.policy_yaml / policy_name (+ extra_allow) into limits and an enforcement.
  virtual absl::StatusOr<std::unique_ptr<SandboxEnforcement>> Prepare(const SandboxOptions& options,
                                                                      PolicyLimits* limits) = 0;
};

}  // namespace flotilla::sandbox
