// Runtime::CleanupLeftovers: what a crashed earlier runtime left behind. A runtime instance owns
// its sandboxes' cgroups <prefix>/<instance>.<sandbox id>, where the instance name holds the
// owner's pid and start time; an instance whose owner is gone is removed: its processes are
// killed and its cgroups removed. (Its image layers were detached mounts held by descriptors:
// they went with the process.) Older runtimes also kept <prefix>/<instance>/<sandbox id> and a
// directory <state>/run/<instance>/ with mounts; those are removed the same way.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/network.h"
#include "runtime_impl.h"
#include "sys_util.h"

namespace flotilla::sandbox {
namespace {

// Instance names are "i<pid>-<start time>-<n>"; the owner is alive when that pid still has
// that start time.
bool OwnerAlive(const std::string& instance) {
  std::vector<std::string> f = absl::StrSplit(instance, '-');
  int pid = 0;
  if (f.size() != 3 || f[0].size() < 2 || f[0][0] != 'i' || !absl::SimpleAtoi(f[0].substr(1), &pid) || pid <= 0) {
    return true;  // not ours: leave it alone
  }
  auto stat = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  size_t p = stat->rfind(')');
  if (p == std::string::npos) return false;
  std::vector<std::string> sf = absl::StrSplit(stat->substr(p + 2), ' ');
  return sf.size() > 19 && sf[19] == f[1];
}

// Mount points at or under `dir` in this mount namespace, deepest first.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> out;
  for (const MountEntry& m : Mounts()) {
    if (m.mount_point == dir || absl::StartsWith(m.mount_point, dir + "/")) out.push_back(m.mount_point);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

}  // namespace

absl::StatusOr<CleanupReport> RuntimeImpl::CleanupLeftovers() {
  CleanupReport report;
  const std::string run = options_.state_dir + "/run";
  std::error_code ec;
  std::vector<std::string> dead;
  for (const auto& e : std::filesystem::directory_iterator(run, ec)) {
    std::string name = e.path().filename().string();
    if (name == instance_ || !e.is_directory(ec)) continue;
    if (!OwnerAlive(name)) dead.push_back(name);
  }
  // Cgroups of dead instances (of any state dir: the name says whose they are): a sandbox's
  // "<instance>.<id>", or an older runtime's "<instance>" group holding its sandboxes.
  std::map<std::string, bool> alive;  // by instance
  for (const std::string& name : cgroups_->ListGroup(options_.cgroup_prefix)) {
    const size_t dot = name.find('.');
    const std::string owner = name.substr(0, dot);
    if (owner == instance_) continue;
    auto [it, fresh] = alive.try_emplace(owner, true);
    if (fresh) it->second = std::find(dead.begin(), dead.end(), owner) == dead.end() && OwnerAlive(owner);
    if (it->second) continue;
    report.sandboxes += dot != std::string::npos
                            ? 1
                            : static_cast<int>(cgroups_->ListGroup(options_.cgroup_prefix + "/" + name).size());
    int killed = 0, removed = 0;
    cgroups_->RemoveGroup(options_.cgroup_prefix + "/" + name, &killed, &removed);
    report.processes += killed;
    report.cgroups += removed;
  }
  for (const std::string& name : dead) {
    const std::string dir = run + "/" + name;
    for (const std::string& mp : MountsUnder(dir)) {
      if (::umount2(mp.c_str(), MNT_DETACH) == 0) ++report.mounts;
    }
    RemoveTree(dir);
  }
  return report;
}

absl::Status RemoveNodeSharedState(const RuntimeOptions& options) {
  if (auto driver = CgroupDriver::Detect(); driver.ok() && IsSafeId(options.cgroup_prefix)) {
    driver->RemoveIfEmpty(options.cgroup_prefix);  // in use by a live runtime: stays
  }
  if (options.bpf_pin_dir.empty()) return absl::OkStatus();
  return policies::NetworkEnforcer::RemovePinned(options.bpf_pin_dir);
}

}  // namespace flotilla::sandbox
