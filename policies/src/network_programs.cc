// Loading the network programs, and the node's pinned copy of them.
#include "network_programs.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/network.h"
#include "net_policy.skel.h"
#include "net_policy_abi.h"

namespace flotilla::policies {
namespace {

constexpr char kNodeAnchorPrefix[] = "flotilla-netpolicy-node.";

uint64_t Fnv1a(const void* data, size_t size, uint64_t h = 1469598103934665603ull) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

// The programs' identity: their object code and the map size they were pinned with.
std::string Version(uint32_t max_rules) {
  size_t size = 0;
  const void* elf = net_policy::elf_bytes(&size);
  return absl::StrFormat("%016x", Fnv1a(&max_rules, sizeof(max_rules), Fnv1a(elf, size)));
}

// The anchor cgroups of the copy pinned under `pin_dir` are named "<this><version>".
std::string AnchorPrefix(const std::string& pin_dir) {
  return absl::StrFormat("%s%08x.", kNodeAnchorPrefix, Fnv1a(pin_dir.data(), pin_dir.size()) & 0xffffffffu);
}

bool IsBpffs(const std::string& dir) {
  struct statfs st {};
  return statfs(dir.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

absl::Status EnsureBpffs(const std::string& pin_dir) {
  if (IsBpffs(pin_dir)) return absl::OkStatus();
  if (mkdir(pin_dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("creating " + pin_dir);
  if (mount("bpf", pin_dir.c_str(), "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") != 0) {
    return ErrnoStatus("mounting a bpffs at " + pin_dir);
  }
  return absl::OkStatus();
}

// An exclusive lock on "<pin_dir>.lock", held while the pins are looked at or changed.
absl::StatusOr<UniqueFd> LockPins(const std::string& pin_dir) {
  std::string parent = pin_dir.substr(0, pin_dir.find_last_of('/'));
  if (!parent.empty() && mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus("creating " + parent);
  }
  UniqueFd lock(open((pin_dir + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  if (!lock.valid()) return ErrnoStatus("opening " + pin_dir + ".lock");
  while (flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoStatus("locking " + pin_dir + ".lock");
  }
  return lock;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

void Unpin(const std::string& dir) {
  for (const std::string& name : Entries(dir)) unlink((dir + "/" + name).c_str());
  rmdir(dir.c_str());
}

// The objects pinned by an earlier process, when every one of them is there and the anchor
// links still hold a live cgroup.
absl::StatusOr<NetworkPrograms> OpenPins(const std::string& dir) {
  NetworkPrograms p;
  auto get = [&](const std::string& name) -> absl::StatusOr<UniqueFd> {
    UniqueFd fd(bpf_obj_get((dir + "/" + name).c_str()));
    if (!fd.valid()) return ErrnoStatus("opening pinned " + name);
    return fd;
  };
  for (size_t i = 0; i < kNetworkPrograms.size(); ++i) {
    ASSIGN_OR_RETURN(p.progs[i], get(kNetworkPrograms[i].name));
    ASSIGN_OR_RETURN(UniqueFd anchor, get(absl::StrCat("anchor_", kNetworkPrograms[i].name)));
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(anchor.get(), &info, &len) != 0 || info.cgroup.cgroup_id == 0) {
      return absl::NotFoundError("the pinned anchor link lost its cgroup");
    }
  }
  ASSIGN_OR_RETURN(p.rules, get("rules"));
  ASSIGN_OR_RETURN(p.denials, get("denials"));
  return p;
}

absl::StatusOr<NetworkPrograms> LoadAndPin(const std::string& dir, const std::string& anchor_name, uint32_t max_rules) {
  ASSIGN_OR_RETURN(NetworkPrograms p, LoadNetworkPrograms(max_rules));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("creating " + dir);
  auto pin = [&](int fd, const std::string& name) -> absl::Status {
    if (bpf_obj_pin(fd, (dir + "/" + name).c_str()) != 0) return BpfStatus("pinning " + name, errno);
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::string cgroup2, FindCgroup2Mount());
  std::string anchor = absl::StrCat(cgroup2, "/", anchor_name);
  if (mkdir(anchor.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("creating " + anchor);
  UniqueFd anchor_fd(open(anchor.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!anchor_fd.valid()) return ErrnoStatus("opening " + anchor);
  for (size_t i = 0; i < kNetworkPrograms.size(); ++i) {
    RETURN_IF_ERROR(pin(p.progs[i].get(), kNetworkPrograms[i].name));
    UniqueFd link(bpf_link_create(p.progs[i].get(), anchor_fd.get(), kNetworkPrograms[i].type, nullptr));
    if (!link.valid()) return BpfStatus("attaching to " + anchor, errno);
    RETURN_IF_ERROR(pin(link.get(), absl::StrCat("anchor_", kNetworkPrograms[i].name)));
  }
  RETURN_IF_ERROR(pin(p.rules.get(), "rules"));
  RETURN_IF_ERROR(pin(p.denials.get(), "denials"));
  return p;
}

}  // namespace

absl::Status BpfStatus(std::string_view what, int err) {
  if (err < 0) err = -err;
  if (err == EPERM || err == EACCES) {
    return absl::PermissionDeniedError(absl::StrCat(std::string(what), ": ", std::strerror(err),
                                                    " (needs CAP_BPF and CAP_NET_ADMIN, or root)"));
  }
  return ErrnoStatus(what, err);
}


absl::StatusOr<NetworkPrograms> LoadNetworkPrograms(uint32_t max_rules) {
  net_policy* skel = net_policy__open();
  if (skel == nullptr) return BpfStatus("opening the BPF network programs", errno);
  bpf_map__set_max_entries(skel->maps.flotilla_rules, max_rules);
  if (int rc = net_policy__load(skel); rc != 0) {
    net_policy__destroy(skel);
    return BpfStatus("loading the BPF network programs", rc);
  }
  NetworkPrograms p;
  p.loaded_here = true;
  for (size_t i = 0; i < kNetworkPrograms.size(); ++i) {
    bpf_program* prog = bpf_object__find_program_by_name(skel->obj, kNetworkPrograms[i].name);
    p.progs[i].Reset(prog ? fcntl(bpf_program__fd(prog), F_DUPFD_CLOEXEC, 0) : -1);
  }
  p.rules.Reset(fcntl(bpf_map__fd(skel->maps.flotilla_rules), F_DUPFD_CLOEXEC, 0));
  p.denials.Reset(fcntl(bpf_map__fd(skel->maps.flotilla_denials), F_DUPFD_CLOEXEC, 0));
  net_policy__destroy(skel);  // the duplicated descriptors keep the objects
  for (const UniqueFd& fd : p.progs) {
    if (!fd.valid()) return absl::InternalError("a BPF network program is missing from its object");
  }
  if (!p.rules.valid() || !p.denials.valid()) return ErrnoStatus("duplicating the BPF map descriptors");
  return p;
}

absl::StatusOr<NetworkPrograms> OpenPinnedNetworkPrograms(const std::string& pin_dir, uint32_t max_rules) {
  if (pin_dir.empty() || pin_dir[0] != '/') return absl::InvalidArgumentError("pin_dir: must be an absolute path");
  ASSIGN_OR_RETURN(UniqueFd lock, LockPins(pin_dir));
  RETURN_IF_ERROR(EnsureBpffs(pin_dir));
  const std::string version = Version(max_rules);
  const std::string dir = pin_dir + "/" + version;
  auto pinned = OpenPins(dir);
  if (pinned.ok()) return pinned;
  Unpin(dir);  // a partial set (a process died while pinning) or an anchor that lost its cgroup
  auto made = LoadAndPin(dir, AnchorPrefix(pin_dir) + version, max_rules);
  if (!made.ok()) Unpin(dir);
  return made;
}

absl::Status RemovePinnedNetworkPrograms(const std::string& pin_dir) {
  ASSIGN_OR_RETURN(UniqueFd lock, LockPins(pin_dir));
  if (IsBpffs(pin_dir)) {
    for (const std::string& version : Entries(pin_dir)) Unpin(pin_dir + "/" + version);
    if (umount2(pin_dir.c_str(), 0) != 0 && errno != EINVAL) return ErrnoStatus("unmounting " + pin_dir);
  }
  rmdir(pin_dir.c_str());
  if (auto cgroup2 = FindCgroup2Mount(); cgroup2.ok()) {
    for (const std::string& name : Entries(*cgroup2)) {
      if (name.rfind(AnchorPrefix(pin_dir), 0) == 0) rmdir((*cgroup2 + "/" + name).c_str());
    }
  }
  unlink((pin_dir + ".lock").c_str());
  rmdir(pin_dir.substr(0, pin_dir.find_last_of('/')).c_str());  // only when empty
  return absl::OkStatus();
}

int PurgeDeadCgroupEntries(int rules_fd, int denials_fd, const std::atomic<bool>* stop) {
  auto cgroup2 = FindCgroup2Mount();
  if (!cgroup2.ok()) return 0;
  UniqueFd root(open(cgroup2->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return 0;
  // A handle of the root tells the handle type of this filesystem; a cgroup's handle is its id.
  alignas(file_handle) char buf[sizeof(file_handle) + sizeof(uint64_t)] = {};
  auto* handle = reinterpret_cast<file_handle*>(buf);
  handle->handle_bytes = sizeof(uint64_t);
  int mount_id = 0;
  if (name_to_handle_at(root.get(), "", handle, &mount_id, AT_EMPTY_PATH) != 0) return 0;
  auto dead = [&](uint64_t id) {
    std::memcpy(handle->f_handle, &id, sizeof(id));
    UniqueFd fd(open_by_handle_at(root.get(), handle, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return !fd.valid() && errno == ESTALE;  // any other failure: keep the entry
  };
  std::set<uint64_t> gone;
  uint64_t key = 0, next = 0;
  const void* prev = nullptr;
  auto stopped = [&] { return stop != nullptr && stop->load(std::memory_order_relaxed); };
  while (!stopped() && bpf_map_get_next_key(denials_fd, prev, &next) == 0) {
    if (dead(next)) gone.insert(next);
    key = next;
    prev = &key;
  }
  if (gone.empty()) return 0;
  std::vector<flotilla_rule_key> stale;
  flotilla_rule_key rkey{}, rnext{};
  const void* rprev = nullptr;
  while (!stopped() && bpf_map_get_next_key(rules_fd, rprev, &rnext) == 0) {
    uint64_t id;
    std::memcpy(&id, rnext.data, sizeof(id));
    if (gone.count(id)) stale.push_back(rnext);
    rkey = rnext;
    rprev = &rkey;
  }
  // Rules before counters: an interrupted pass leaves the counter, so the next pass finds the
  // dead cgroup again and finishes its rules.
  for (const flotilla_rule_key& k : stale) bpf_map_delete_elem(rules_fd, &k);
  if (stopped()) return 0;
  for (uint64_t id : gone) bpf_map_delete_elem(denials_fd, &id);
  return static_cast<int>(gone.size());
}

}  // namespace flotilla::policies
