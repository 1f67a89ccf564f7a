// Landlock rulesets from the filesystem policy; landlock_apply.cc applies them.
#include "flotilla/policies/landlock.h"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/child_enforcement.h"
#include "landlock_encoding.h"

namespace flotilla::policies {
namespace {

using namespace landlock_encoding;

uint64_t HandledRights(int abi) {
  uint64_t r = kAbi1Rights;
  if (abi >= 2) r |= kAccessRefer;
  if (abi >= 3) r |= kAccessTruncate;
  if (abi >= 5) r |= kAccessIoctlDev;
  return r;
}

bool StrictlyBeneath(const std::string& outer, const std::string& inner) {
  return inner != outer && PathWithin(outer.c_str(), outer.size(), inner.c_str());
}

}  // namespace

int LandlockAbiVersion() {
  long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

absl::StatusOr<LandlockPlan> LandlockPlan::Create(const FilesystemPolicy& policy) {
  LandlockPlan plan;
  plan.abi_ = LandlockAbiVersion();
  if (plan.abi_ == 0) {
    return absl::FailedPreconditionError("landlock: not available in this kernel (or disabled at boot)");
  }
  plan.handled_ = HandledRights(plan.abi_);
  for (const auto* list : {&policy.read_only, &policy.read_write, &policy.hidden}) {
    for (const auto& p : *list) {
      if (p.empty() || p[0] != '/') {
        return absl::InvalidArgumentError(absl::StrCat("landlock: path '", p, "' must be absolute"));
      }
    }
  }
  for (const auto& p : policy.read_only) plan.rules_.push_back(Rule{p, kReadRights & plan.handled_});
  for (const auto& p : policy.read_write) plan.rules_.push_back(Rule{p, plan.handled_});
  // Landlock only adds rights going down a tree. A hidden path, or a path with fewer rights,
  // beneath a granted one makes the granted one expand into its other entries.
  plan.hidden_ = policy.hidden;
  for (const auto& inner : plan.rules_) {
    for (const auto& outer : plan.rules_) {
      if (StrictlyBeneath(outer.path, inner.path) && (outer.access & ~inner.access) != 0 &&
          std::find(plan.hidden_.begin(), plan.hidden_.end(), inner.path) == plan.hidden_.end()) {
        plan.restricted_.push_back(inner.path);
        break;
      }
    }
  }
  plan.restricted_.insert(plan.restricted_.end(), plan.hidden_.begin(), plan.hidden_.end());
  for (auto& rule : plan.rules_) {
    for (const auto& r : plan.restricted_) rule.expand = rule.expand || StrictlyBeneath(rule.path, r);
  }
  // A hidden path that is itself a rule's path gets no rule at all.
  plan.rules_.erase(std::remove_if(plan.rules_.begin(), plan.rules_.end(),
                                   [&](const Rule& r) {
                                     return std::find(plan.hidden_.begin(), plan.hidden_.end(), r.path) !=
                                            plan.hidden_.end();
                                   }),
                    plan.rules_.end());
  EncodedHeader h{};
  h.abi = static_cast<uint32_t>(plan.abi_);
  h.n_rules = static_cast<uint32_t>(plan.rules_.size());
  h.n_restricted = static_cast<uint32_t>(plan.restricted_.size());
  h.handled = plan.handled_;
  plan.encoded_.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  for (const auto& rule : plan.rules_) {
    plan.encoded_.append(reinterpret_cast<const char*>(&rule.access), sizeof(rule.access));
    plan.encoded_.push_back(rule.expand ? 1 : 0);
    plan.encoded_.append(rule.path.c_str(), rule.path.size() + 1);
  }
  for (const auto& r : plan.restricted_) plan.encoded_.append(r.c_str(), r.size() + 1);
  return plan;
}

int LandlockPlan::ApplyInChild(const char** failed_step) const noexcept {
  return ApplyEncodedLandlockPlan(encoded_.data(), encoded_.size(), failed_step);
}

absl::Status LandlockPlan::Apply() const {
  const char* step = "";
  if (int err = ApplyInChild(&step); err != 0) return ErrnoStatus(absl::StrCat("landlock: ", step), err);
  return absl::OkStatus();
}

}  // namespace flotilla::policies
