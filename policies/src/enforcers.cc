// Which enforcers this host supports, probed now.
#include "flotilla/policies/enforcers.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/policies/apparmor.h"
#include "flotilla/policies/landlock.h"
#include "flotilla/policies/network.h"

namespace flotilla::policies {
namespace {

std::vector<std::string> SeccompActions() {
  std::ifstream in("/proc/sys/kernel/seccomp/actions_avail");
  std::string line;
  std::getline(in, line);
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

bool Has(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::vector<EnforcerStatus> ProbeEnforcers() {
  std::vector<EnforcerStatus> out;
  std::vector<std::string> actions = SeccompActions();
  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 && Has(actions, "errno");
  out.push_back({"seccomp", seccomp,
                 seccomp ? "seccomp: filters with errno actions" : "seccomp: not available in this kernel"});
  bool notify = seccomp && Has(actions, "user_notif");
  out.push_back({"seccomp_notify", notify,
                 notify ? "seccomp: user notification (violations counted)"
                        : "seccomp: no user notification in this kernel (violations not counted)"});

  auto cgroup2 = FindCgroup2Mount();
  if (!cgroup2.ok()) {
    out.push_back({"ebpf_network", false, absl::StrCat("ebpf_network: ", cgroup2.status().message())});
  } else {
    auto enforcer = NetworkEnforcer::Create(NetworkEnforcer::Options{.max_rules = 16, .keep_hooks_warm = false, .pin_dir = ""});
    out.push_back({"ebpf_network", enforcer.ok(),
                   enforcer.ok() ? absl::StrCat("ebpf_network: cgroup v2 at ", *cgroup2)
                                 : absl::StrCat("ebpf_network: ", enforcer.status().message())});
  }

  int abi = LandlockAbiVersion();
  out.push_back({"landlock", abi > 0,
                 abi > 0 ? absl::StrCat("landlock: ABI ", abi)
                         : "landlock: not available in this kernel (or not in the lsm= boot list)"});

  if (!AppArmorEnabled()) {
    out.push_back({"apparmor", false, "apparmor: not enabled in this kernel"});
  } else {
    auto parser = FindAppArmorParser();
    out.push_back({"apparmor", parser.ok(),
                   parser.ok() ? "apparmor: enabled" : std::string(parser.status().message())});
  }
  return out;
}

}  // namespace flotilla::policies
