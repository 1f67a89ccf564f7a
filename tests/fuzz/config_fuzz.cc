// The YAML documents users hand in: experiment.yaml (trainer_bridge/experiment_config.h) and
// sandbox policies (policies/policy.h). Either a config or an InvalidArgument naming the field.
#include <string>

#include "flotilla/policies/policy.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

FLOTILLA_FUZZ_TARGET(experiment_yaml) {
  auto cfg = flotilla::trainer_bridge::ParseExperimentConfig(std::string(reinterpret_cast<const char*>(data), size),
                                                             "experiment.yaml", "base");
  if (!cfg.ok()) FUZZ_CHECK(!cfg.status().message().empty());
}

FLOTILLA_FUZZ_TARGET(policy_yaml) {
  flotilla::policies::PolicyLoadOptions options;
  options.apt_root = "/nonexistent-apt-root";  // no name lookups for package mirrors
  options.defer_moot_deny_lists = true;
  auto policy = flotilla::policies::ParsePolicyText(std::string_view(reinterpret_cast<const char*>(data), size),
                                                    "policy.yaml", options);
  if (!policy.ok()) FUZZ_CHECK(!policy.status().message().empty());
}
