// The network enforcer's kernel objects and where they come from: loaded by this process, or
// shared by every process of the node through pins in a bpffs of flotilla's own.
#pragma once

#include <bpf/bpf.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::policies {

// The four programs, by their names in net_policy.bpf.c, and their attach points.
struct NetworkProgramSpec {
  const char* name;
  bpf_attach_type type;
};
inline constexpr std::array<NetworkProgramSpec, 4> kNetworkPrograms = {{
    {"flotilla_connect4", BPF_CGROUP_INET4_CONNECT},
    {"flotilla_connect6", BPF_CGROUP_INET6_CONNECT},
    {"flotilla_sendmsg4", BPF_CGROUP_UDP4_SENDMSG},
    {"flotilla_sendmsg6", BPF_CGROUP_UDP6_SENDMSG},
}};

struct NetworkPrograms {
  std::array<UniqueFd, 4> progs;  // in kNetworkPrograms order
  UniqueFd rules;                 // LPM trie of (cgroup id, prefix) -> ports
  UniqueFd denials;               // cgroup id -> refused calls
  bool loaded_here = false;       // false: taken from the node's pins
};

// A failed bpf() call as a status; EPERM/EACCES say which privileges are missing.
absl::Status BpfStatus(std::string_view what, int err);

// Loads (and the kernel verifies) the programs and creates their maps, owned by this process.
absl::StatusOr<NetworkPrograms> LoadNetworkPrograms(uint32_t max_rules);

// The node's shared copy under `pin_dir`: taken from the pins when an earlier process left
// them, otherwise loaded and pinned now, together with links of the four programs to an empty
// cgroup "<cgroup2>/flotilla-netpolicy-node.<pin_dir hash>.<version>" that keep the kernel's cgroup hooks
// switched on between processes. `pin_dir` is a bpffs of flotilla's own, mounted here when it
// is not one yet; a lock file beside it serialises the processes that set it up. The version
// (a hash of the programs' object code and max_rules) keeps programs of another build apart.
absl::StatusOr<NetworkPrograms> OpenPinnedNetworkPrograms(const std::string& pin_dir, uint32_t max_rules);

// Takes the node's shared copy away: unpins everything under `pin_dir`, removes the anchor
// cgroups and unmounts the bpffs. Processes holding the objects keep them until they close
// them; the next process pins a new copy.
absl::Status RemovePinnedNetworkPrograms(const std::string& pin_dir);

// Deletes the rule and counter entries of cgroups that no longer exist (a process that died
// before detaching its sandboxes). Returns how many cgroups' entries went. Stops early, with
// part done, once *stop (when given) turns true.
int PurgeDeadCgroupEntries(int rules_fd, int denials_fd, const std::atomic<bool>* stop = nullptr);

}  // namespace flotilla::policies
