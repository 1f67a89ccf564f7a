// The eBPF network enforcer: the cgroup sock_addr programs loaded once (per process, or per
// node through pins), attached per sandbox.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "cgroup2_internal.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/network.h"
#include "net_policy_abi.h"
#include "net_rules.h"
#include "network_programs.h"

namespace flotilla::policies {

struct NetworkEnforcer::Impl {
  NetworkPrograms programs;
  std::string anchor_dir;             // empty: none
  std::vector<UniqueFd> anchor_links;
  ~Impl() {
    anchor_links.clear();
    if (!anchor_dir.empty()) rmdir(anchor_dir.c_str());
  }
};

namespace {

constexpr char kAnchorPrefix[] = "flotilla-netpolicy-anchor.";

// Removes anchor cgroups left by processes that no longer exist (a crashed agent).
void RemoveStaleAnchors(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    std::string_view name(e->d_name);
    if (name.substr(0, sizeof(kAnchorPrefix) - 1) != kAnchorPrefix) continue;
    int pid = std::atoi(e->d_name + sizeof(kAnchorPrefix) - 1);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) rmdir((root + "/" + e->d_name).c_str());
  }
  closedir(dir);
}

flotilla_rule_key MakeKey(uint64_t cgroup_id, const Cidr& cidr) {
  flotilla_rule_key key{};
  key.prefixlen = 64 + cidr.prefix_len;
  std::memcpy(key.data, &cgroup_id, 8);
  std::memcpy(key.data + 8, cidr.addr.data(), 16);
  return key;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetworkEnforcer>> NetworkEnforcer::Create(const Options& options) {
  auto impl = std::make_unique<Impl>();
  if (!options.pin_dir.empty()) {
    // The node's shared copy: its pinned anchor keeps the hooks on, so there is no own anchor.
    auto pinned = OpenPinnedNetworkPrograms(options.pin_dir, options.max_rules);
    if (pinned.ok()) {
      impl->programs = std::move(*pinned);
      return std::unique_ptr<NetworkEnforcer>(new NetworkEnforcer(std::move(impl)));
    }
    // No bpffs to share through (a mount the host refuses, say): the programs still load for
    // this process alone, so the policy is enforced all the same.
    FLOG(warn, "network programs not shared through pins; loading them for this process",
         {{"pin_dir", options.pin_dir}, {"error", std::string(pinned.status().message())}});
  }
  ASSIGN_OR_RETURN(impl->programs, LoadNetworkPrograms(options.max_rules));
  if (options.keep_hooks_warm) {
    // The kernel switches each cgroup hook on (live code patching, milliseconds) when the
    // first program anywhere attaches to it and off when the last one leaves. An empty
    // cgroup holding the programs for the enforcer's lifetime keeps that off the per-sandbox
    // path. It has no tasks, so its (absent) rules never judge anything.
    ASSIGN_OR_RETURN(std::string root, FindCgroup2Mount());
    RemoveStaleAnchors(root);
    impl->anchor_dir = absl::StrCat(root, "/", kAnchorPrefix, getpid());
    if (mkdir(impl->anchor_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      int err = errno;
      impl->anchor_dir.clear();
      return ErrnoStatus("creating the BPF anchor cgroup", err);
    }
    UniqueFd dir(open(impl->anchor_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid()) return ErrnoStatus("opening the BPF anchor cgroup");
    for (size_t i = 0; i < kNetworkPrograms.size(); ++i) {
      int link = bpf_link_create(impl->programs.progs[i].get(), dir.get(), kNetworkPrograms[i].type, nullptr);
      if (link < 0) return BpfStatus("attaching to the BPF anchor cgroup", link);
      impl->anchor_links.emplace_back(link);
    }
  }
  return std::unique_ptr<NetworkEnforcer>(new NetworkEnforcer(std::move(impl)));
}

absl::Status NetworkEnforcer::RemovePinned(const std::string& pin_dir) { return RemovePinnedNetworkPrograms(pin_dir); }

NetworkEnforcer::NetworkEnforcer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NetworkEnforcer::~NetworkEnforcer() = default;

absl::StatusOr<std::unique_ptr<NetworkAttachment>> NetworkEnforcer::Attach(const NetworkPolicy& policy,
                                                                          int cgroup_dir_fd) {
  ASSIGN_OR_RETURN(uint64_t cgroup_id, Cgroup2Id(cgroup_dir_fd));
  ASSIGN_OR_RETURN(std::vector<RuleEntry> entries, BuildRuleEntries(policy));
  std::unique_ptr<NetworkAttachment> att(new NetworkAttachment(this, cgroup_id));
  // Rules go in before the links, so the sandbox never runs under a half-written policy.
  uint64_t zero = 0;
  if (bpf_map_update_elem(impl_->programs.denials.get(), &cgroup_id, &zero, BPF_NOEXIST) != 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat("cgroup ", cgroup_id, " already has a network policy"));
    return BpfStatus("creating the denial counter", errno);
  }
  att->counter_created_ = true;
  for (const auto& e : entries) {
    flotilla_rule_key key = MakeKey(cgroup_id, e.cidr);
    flotilla_rule_value value{};
    value.flags = e.deny ? FLOTILLA_RULE_DENY : 0;
    value.nranges = static_cast<uint32_t>(e.ports.size());
    for (size_t i = 0; i < e.ports.size(); ++i) value.ranges[i] = {e.ports[i].lo, e.ports[i].hi};
    if (bpf_map_update_elem(impl_->programs.rules.get(), &key, &value, BPF_ANY) != 0) {
      return BpfStatus(absl::StrCat("writing the network rule for ", e.cidr.ToString()), errno);
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(&key);
    att->keys_.emplace_back(bytes, bytes + sizeof(key));
  }
  att->rule_count_ = entries.size();
  for (size_t i = 0; i < kNetworkPrograms.size(); ++i) {
    int link = bpf_link_create(impl_->programs.progs[i].get(), cgroup_dir_fd, kNetworkPrograms[i].type, nullptr);
    if (link < 0) return BpfStatus(absl::StrCat("attaching ", kNetworkPrograms[i].name, " to the cgroup"), link);
    att->links_.emplace_back(link);
  }
  return att;
}

void NetworkEnforcer::Detach(NetworkAttachment* att) {
  att->links_.clear();  // closing a link fd detaches its program
  for (const auto& key : att->keys_) bpf_map_delete_elem(impl_->programs.rules.get(), key.data());
  att->keys_.clear();
  if (att->counter_created_) bpf_map_delete_elem(impl_->programs.denials.get(), &att->cgroup_id_);
}

int NetworkEnforcer::PurgeDeadCgroups(const std::atomic<bool>* stop) {
  return PurgeDeadCgroupEntries(impl_->programs.rules.get(), impl_->programs.denials.get(), stop);
}

uint64_t NetworkEnforcer::Denials(uint64_t cgroup_id) const {
  uint64_t count = 0;
  if (bpf_map_lookup_elem(impl_->programs.denials.get(), &cgroup_id, &count) != 0) return 0;
  return count;
}

NetworkAttachment::~NetworkAttachment() { owner_->Detach(this); }

uint64_t NetworkAttachment::denials() const { return owner_->Denials(cgroup_id_); }

std::vector<uint32_t> NetworkAttachment::link_ids() const {
  std::vector<uint32_t> ids;
  for (const auto& fd : links_) {
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0) ids.push_back(info.id);
  }
  return ids;
}

}  // namespace flotilla::policies
