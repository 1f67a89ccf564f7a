// Which enforcers work on this host, and why not.
#pragma once

#include <string>
#include <vector>

namespace flotilla::policies {

struct EnforcerStatus {
  std::string name;    // "seccomp", "seccomp_notify", "ebpf_network", "landlock", "apparmor"
  bool active = false;
  std::string detail;  // why not ("apparmor: not enabled in this kernel"), or what ("landlock ABI 7")
};

// Probes the running kernel and host once per call (cheap: a few syscalls and file reads; the
// eBPF probe loads a trivial program). Thread-safe.
std::vector<EnforcerStatus> ProbeEnforcers();

}  // namespace flotilla::policies
