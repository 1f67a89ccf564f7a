// PolicyEnforcement without the policy compilers: resolves only the policy name and reports
// every enforcer as inactive. Replaced by policies/ when that component is linked.
#include "enforcement.h"

namespace flotilla::sandbox {
namespace {

class NoSandboxEnforcement final : public SandboxEnforcement {
 public:
  void AddChildHooks(InitPlan*) override {}
  absl::Status AfterStart(const std::string&) override { return absl::OkStatus(); }
  uint64_t Violations() const override { return 0; }
  const std::vector<std::string>& active() const override { return active_; }
  const std::vector<std::string>& inactive() const override { return inactive_; }

 private:
  std::vector<std::string> active_;
  std::vector<std::string> inactive_{"seccomp: policy compilers not linked", "ebpf-net: policy compilers not linked",
                                     "landlock: policy compilers not linked", "apparmor: policy compilers not linked"};
};

class NoPolicyEnforcement final : public PolicyEnforcement {
 public:
  absl::StatusOr<std::unique_ptr<SandboxEnforcement>> Prepare(const SandboxOptions& options,
                                                              PolicyLimits* limits) override {
    if (!options.policy_yaml.empty()) return absl::UnimplementedError("policy_yaml: policy compilers not linked");
    *limits = PolicyLimits{};
    return std::make_unique<NoSandboxEnforcement>();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyEnforcement>> PolicyEnforcement::Create(const RuntimeOptions&) {
  return std::make_unique<NoPolicyEnforcement>();
}

}  // namespace flotilla::sandbox
