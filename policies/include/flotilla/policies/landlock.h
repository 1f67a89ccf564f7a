// Landlock: the filesystem policy as a Landlock ruleset, applied by the sandboxed process
// itself (after pivot_root, so the paths are in-sandbox paths).
//
//   parent: ASSIGN_OR_RETURN(LandlockPlan plan, LandlockPlan::Create(policy.filesystem));
//   child : if (int err = plan.ApplyInChild(); err != 0) _exit(...);
//
// read_only paths get read/execute rights beneath them, read_write paths every right the
// kernel's ABI knows; everything else is denied. Landlock can only add rights going down a
// tree, so a hidden path (or a read_only one) beneath a granted directory makes the plan grant
// that directory's other entries one by one instead, descending towards the restricted path;
// the directory itself then keeps only listing. Entries created there later are not covered.
// Paths that do not exist in the sandbox are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/policies/child_enforcement.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {

// The Landlock ABI version of the running kernel (1..), or 0 when Landlock is unavailable
// (not built in, or disabled at boot).
int LandlockAbiVersion();

// A prepared ruleset: the access masks are fixed for the running kernel's ABI at Create();
// ApplyInChild() only opens paths and makes system calls. Immutable after Create; applying
// it from many processes at once is fine.
class LandlockPlan {
 public:
  // FailedPrecondition when the kernel has no Landlock; InvalidArgument for a relative path.
  static absl::StatusOr<LandlockPlan> Create(const FilesystemPolicy& policy);

  // Restricts the calling thread (and what it execs) for good: sets no_new_privs, creates the
  // ruleset, adds the rules, calls landlock_restrict_self. Async-signal-safe: no allocation,
  // no locks; the hidden-path expansion reads directories with getdents64 into a stack buffer.
  // On ABI >= 6 the domain is also scoped: no signals and no abstract unix sockets to
  // processes outside it. Returns 0 or an errno value; `failed_step` (optional) names the
  // failing system call.
  int ApplyInChild(const char** failed_step = nullptr) const noexcept;
  // The same with a Status naming the failing step.
  absl::Status Apply() const;

  // The plan as bytes that need no allocation to apply, for a process that does not share
  // this one's memory (a sandbox init started by a zygote): ApplyEncodedLandlockPlan
  // (child_enforcement.h) does what ApplyInChild() does from them. Same bytes for the same plan.
  [[nodiscard]] const std::string& encoded() const { return encoded_; }

  [[nodiscard]] int abi() const { return abi_; }
  [[nodiscard]] uint64_t handled_access() const { return handled_; }

 private:
  struct Rule {
    std::string path;
    uint64_t access = 0;
    bool expand = false;  // grant the entries beneath one by one, skipping hidden ones
  };
  int abi_ = 0;
  uint64_t handled_ = 0;
  std::vector<Rule> rules_;
  std::vector<std::string> hidden_;
  std::vector<std::string> restricted_;  // hidden paths and paths with fewer rights than a parent
  std::string encoded_;
};

}  // namespace flotilla::policies
