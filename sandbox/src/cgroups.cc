#include "cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "flotilla/common/status.h"
#include "sys_util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

namespace flotilla::sandbox {
namespace {

bool IsFs(const std::string& path, long magic) {
  struct statfs st;
  return ::statfs(path.c_str(), &st) == 0 && static_cast<long>(st.f_type) == magic;
}

absl::Status MkdirIfMissing(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  return absl::OkStatus();
}

// Kills the processes listed in <dir>/cgroup.procs; returns how many.
int KillProcs(const std::string& dir) {
  auto procs = ReadSmallFile(dir + "/cgroup.procs");
  if (!procs.ok()) return 0;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(*procs, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 1 && ::kill(pid, SIGKILL) == 0) ++n;
  }
  return n;
}

// rmdir with a short retry: a cgroup whose last task is exiting is briefly busy.
absl::Status RmdirRetry(const std::string& dir) {
  for (int i = 0; i < 200; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
    if (errno != EBUSY) return ErrnoStatus("rmdir " + dir);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return ErrnoStatus("rmdir " + dir, EBUSY);
}

// A CPU limit that could not be written fails the sandbox's creation, naming the field.
absl::Status CpuLimitApplied(absl::string_view field, const absl::Status& written) {
  if (written.ok()) return written;
  return absl::FailedPreconditionError(absl::StrCat(field, ": not applied (", written.message(), ")"));
}

}  // namespace

CgroupDriver CgroupDriver::PureV2At(const std::string& root, bool cpuset) {
  CgroupDriver d;
  d.pure_v2_ = true;
  d.v2_ = root;
  d.unified_ = root;
  d.v2_cpuset_ = cpuset;
  return d;
}

absl::StatusOr<CgroupDriver> CgroupDriver::Detect(const std::string& root) {
  CgroupDriver d;
  if (IsFs(root, CGROUP2_SUPER_MAGIC)) {
    auto controllers = ReadSmallFile(root + "/cgroup.controllers");
    if (controllers.ok() && absl::StrContains(*controllers, "memory") && absl::StrContains(*controllers, "pids")) {
      d.pure_v2_ = true;
      d.v2_ = root;
      d.unified_ = root;
      d.v2_cpuset_ = absl::StrContains(*controllers, "cpuset");
      return d;
    }
    return absl::UnavailableError("cgroup v2 at " + root + " lacks the memory and pids controllers");
  }
  auto v1 = [&](const char* name) { return IsFs(root + "/" + name, CGROUP_SUPER_MAGIC) ? root + "/" + name : ""; };
  d.memory_ = v1("memory");
  d.pids_ = v1("pids");
  d.cpu_ = v1("cpu");
  if (d.cpu_.empty()) d.cpu_ = v1("cpu,cpuacct");
  d.freezer_ = v1("freezer");
  d.cpuset_ = v1("cpuset");
  if (IsFs(root + "/unified", CGROUP2_SUPER_MAGIC)) d.unified_ = root + "/unified";
  if (d.memory_.empty() || d.pids_.empty() || d.freezer_.empty()) {
    return absl::UnavailableError("no usable cgroups under " + root +
                                  ": need v2 with memory+pids or v1 memory, pids and freezer");
  }
  return d;
}

std::string CgroupDriver::Describe() const {
  if (pure_v2_) return "cgroup v2 at " + v2_;
  return absl::StrCat("cgroup v1 (memory, pids, ", cpu_.empty() ? "no cpu" : "cpu", ", freezer",
                      cpuset_.empty() ? "" : ", cpuset", ")",
                      unified_.empty() ? "" : " + v2 " + unified_ + " for BPF");
}

absl::Status CgroupDriver::EnsureGroup(const std::string& group) const {
  std::vector<std::string> roots;
  if (pure_v2_) {
    roots = {v2_};
  } else {
    roots = {memory_, pids_, freezer_};
    if (!cpu_.empty()) roots.push_back(cpu_);
    if (!unified_.empty()) roots.push_back(unified_);
  }
  for (const std::string& r : roots) {
    std::string path = r;
    for (absl::string_view part : absl::StrSplit(group, '/', absl::SkipEmpty())) {
      absl::StrAppend(&path, "/", part);
      RETURN_IF_ERROR(MkdirIfMissing(path));
      if (pure_v2_) {
        // Children need the controllers delegated; missing ones (cpu) are tolerated.
        (void)WriteSmallFile(path + "/cgroup.subtree_control", "+memory +pids +cpu");
        if (v2_cpuset_) (void)WriteSmallFile(path + "/cgroup.subtree_control", "+cpuset");
      }
    }
  }
  if (pure_v2_) {
    (void)WriteSmallFile(v2_ + "/cgroup.subtree_control", "+memory +pids +cpu");
    if (v2_cpuset_) (void)WriteSmallFile(v2_ + "/cgroup.subtree_control", "+cpuset");
  }
  return absl::OkStatus();
}

namespace {

// Sets the CPU and memory-node lists of cpuset `dir`: the value `limits` gives, or else the
// parent's (a v1 cpuset with an empty list takes no tasks; `parent` empty: leave it unset, as
// v2 inherits). The kernel checks each list against the parent's (an unknown CPU is EINVAL).
absl::Status PinCpuset(const std::string& dir, const std::string& parent, const CgroupLimits& limits) {
  struct List {
    const char* file;
    const char* field;
    const std::string& value;
  };
  for (const List& l : {List{"cpuset.cpus", "cpus", limits.cpus}, List{"cpuset.mems", "mems", limits.mems}}) {
    if (l.value.empty()) {
      if (parent.empty()) continue;
      ASSIGN_OR_RETURN(std::string v, ReadSmallFile(parent + "/" + l.file));
      RETURN_IF_ERROR(WriteSmallFile(dir + "/" + l.file, std::string(absl::StripAsciiWhitespace(v))));
    } else if (absl::Status s = WriteSmallFile(dir + "/" + l.file, l.value); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resources.", l.field, ": cannot pin to '", l.value, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CgroupDriver::EnsureCpusetGroup(const std::string& group) const {
  std::string path = cpuset_;
  for (absl::string_view part : absl::StrSplit(group, '/', absl::SkipEmpty())) {
    const std::string parent = path;
    absl::StrAppend(&path, "/", part);
    if (::mkdir(path.c_str(), 0755) != 0) {
      if (errno == EEXIST) continue;
      return ErrnoStatus("mkdir cgroup " + path);
    }
    RETURN_IF_ERROR(PinCpuset(path, parent, CgroupLimits{}));
  }
  return absl::OkStatus();
}


absl::StatusOr<std::unique_ptr<SandboxCgroup>> CgroupDriver::Create(const std::string& group, const std::string& name,
                                                                    const CgroupLimits& limits) const {
  ASSIGN_OR_RETURN(std::unique_ptr<SandboxCgroup> cg, Make(group, name));
  RETURN_IF_ERROR(Limit(*cg, limits));
  return cg;
}

absl::StatusOr<std::unique_ptr<SandboxCgroup>> CgroupDriver::Make(const std::string& group,
                                                                  const std::string& name) const {
  std::unique_ptr<SandboxCgroup> cg(new SandboxCgroup());
  cg->pure_v2_ = pure_v2_;
  cg->group_ = group;
  cg->rel_ = "/" + group + "/" + name;
  if (pure_v2_) {
    ASSIGN_OR_RETURN(std::string dir, cg->MakeIn(v2_));
    cg->unified_dir_ = cg->memory_dir_ = cg->pids_dir_ = cg->freezer_dir_ = dir;
    return cg;
  }
  ASSIGN_OR_RETURN(cg->memory_dir_, cg->MakeIn(memory_));
  ASSIGN_OR_RETURN(cg->pids_dir_, cg->MakeIn(pids_));
  ASSIGN_OR_RETURN(cg->freezer_dir_, cg->MakeIn(freezer_));
  if (!unified_.empty()) {
    ASSIGN_OR_RETURN(cg->unified_dir_, cg->MakeIn(unified_));
  }
  return cg;
}

absl::Status CgroupDriver::Limit(SandboxCgroup& cg, const CgroupLimits& limits) const {
  const bool pin = !limits.cpus.empty() || !limits.mems.empty();
  if (pin && !has_cpuset()) {
    return absl::FailedPreconditionError("resources.cpus: this host has no cpuset cgroup controller to pin with");
  }
  if (pure_v2_) {
    const std::string& dir = cg.memory_dir_;
    if (limits.memory_bytes) RETURN_IF_ERROR(WriteSmallFile(dir + "/memory.max", absl::StrCat(limits.memory_bytes)));
    (void)WriteSmallFile(dir + "/memory.swap.max", "0");
    if (limits.pids) RETURN_IF_ERROR(WriteSmallFile(dir + "/pids.max", absl::StrCat(limits.pids)));
    // Without the cpu controller delegated the files are missing: the limit must not be
    // dropped silently.
    if (limits.cpu_weight && limits.cpu_weight != 100) {
      RETURN_IF_ERROR(CpuLimitApplied("resources.cpu_weight",
                                      WriteSmallFile(dir + "/cpu.weight", absl::StrCat(limits.cpu_weight))));
    }
    if (limits.cpu_quota_millicores) {
      RETURN_IF_ERROR(CpuLimitApplied(
          "resources.cpu_quota_millicores",
          WriteSmallFile(dir + "/cpu.max", absl::StrCat(uint64_t{limits.cpu_quota_millicores} * 100, " 100000"))));
    }
    if (pin) RETURN_IF_ERROR(PinCpuset(dir, "", limits));
    return absl::OkStatus();
  }
  if (limits.memory_bytes) {
    RETURN_IF_ERROR(WriteSmallFile(cg.memory_dir_ + "/memory.limit_in_bytes", absl::StrCat(limits.memory_bytes)));
  }
  if (limits.pids) RETURN_IF_ERROR(WriteSmallFile(cg.pids_dir_ + "/pids.max", absl::StrCat(limits.pids)));
  if ((limits.cpu_weight && limits.cpu_weight != 100) || limits.cpu_quota_millicores) {
    if (cpu_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          limits.cpu_quota_millicores ? "resources.cpu_quota_millicores" : "resources.cpu_weight",
          ": not applied (this host mounts no cgroup v1 cpu controller)"));
    }
    ASSIGN_OR_RETURN(std::string cpu, cg.MakeIn(cpu_));
    if (limits.cpu_weight && limits.cpu_weight != 100) {
      // v2 weight 100 == v1 shares 1024.
      RETURN_IF_ERROR(WriteSmallFile(cpu + "/cpu.shares", absl::StrCat(std::max<uint64_t>(2, limits.cpu_weight * 1024ull / 100))));
    }
    if (limits.cpu_quota_millicores) {
      RETURN_IF_ERROR(WriteSmallFile(cpu + "/cpu.cfs_quota_us", absl::StrCat(uint64_t{limits.cpu_quota_millicores} * 100)));
    }
  }
  if (pin) {
    RETURN_IF_ERROR(EnsureCpusetGroup(cg.group_));
    ASSIGN_OR_RETURN(std::string dir, cg.MakeIn(cpuset_));
    RETURN_IF_ERROR(PinCpuset(dir, cpuset_ + "/" + cg.group_, limits));
  }
  return absl::OkStatus();
}

void CgroupDriver::RemoveGroup(const std::string& group, int* killed, int* removed) const {
  std::vector<std::string> roots = pure_v2_ ? std::vector<std::string>{v2_}
                                            : std::vector<std::string>{memory_, pids_, freezer_, cpu_, cpuset_, unified_};
  for (const std::string& r : roots) {
    if (r.empty()) continue;
    std::string top = r + "/" + group;
    for (const std::string& child : ListGroupAt(top)) {
      std::string dir = top + "/" + child;
      if (r == freezer_) (void)WriteSmallFile(dir + "/freezer.state", "THAWED");
      if (r == v2_) (void)WriteSmallFile(dir + "/cgroup.freeze", "0");
      *killed += KillProcs(dir);
      if (RmdirRetry(dir).ok()) ++*removed;
    }
    *killed += KillProcs(top);
    if (RmdirRetry(top).ok()) ++*removed;
  }
}

void CgroupDriver::RemoveIfEmpty(const std::string& group) const {
  for (const std::string& r : {v2_, memory_, pids_, freezer_, cpu_, cpuset_, unified_}) {
    if (!r.empty()) (void)::rmdir((r + "/" + group).c_str());
  }
}

std::vector<std::string> CgroupDriver::ListGroupAt(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) out.push_back(e.path().filename().string());
  }
  return out;
}

std::vector<std::string> CgroupDriver::ListGroup(const std::string& group) const {
  return ListGroupAt((pure_v2_ ? v2_ : memory_) + "/" + group);
}

absl::StatusOr<std::string> SandboxCgroup::MakeIn(const std::string& root) {
  std::string dir = root + rel_;
  if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus("mkdir cgroup " + dir);
  dirs_.push_back(dir);
  procs_files_.push_back(dir + "/cgroup.procs");
  return dir;
}

SandboxCgroup::~SandboxCgroup() {
  if (!removed_) {
    KillAll();
    (void)Remove();
  }
}

CgroupCounters SandboxCgroup::Counters() const {
  CgroupCounters c;
  if (pure_v2_) {
    if (auto ev = ReadSmallFile(memory_dir_ + "/memory.events"); ev.ok()) c.oom_kills = KeyedValue(*ev, "oom_kill");
    if (auto ev = ReadSmallFile(pids_dir_ + "/pids.events"); ev.ok()) c.pids_max_hits = KeyedValue(*ev, "max");
    if (auto cur = ReadSmallFile(memory_dir_ + "/memory.current"); cur.ok()) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*cur), &c.memory_current);
    }
    return c;
  }
  if (auto oc = ReadSmallFile(memory_dir_ + "/memory.oom_control"); oc.ok()) c.oom_kills = KeyedValue(*oc, "oom_kill");
  if (auto ev = ReadSmallFile(pids_dir_ + "/pids.events"); ev.ok()) c.pids_max_hits = KeyedValue(*ev, "max");
  if (auto cur = ReadSmallFile(memory_dir_ + "/memory.usage_in_bytes"); cur.ok()) {
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*cur), &c.memory_current);
  }
  return c;
}

bool SandboxCgroup::Empty() const {
  for (const std::string& procs : procs_files_) {
    auto pids = ReadSmallFile(procs);
    if (!pids.ok() || !absl::StripAsciiWhitespace(*pids).empty()) return false;
  }
  return true;
}

absl::Status SandboxCgroup::Freeze(bool frozen) {
  if (pure_v2_) {
    RETURN_IF_ERROR(WriteSmallFile(freezer_dir_ + "/cgroup.freeze", frozen ? "1" : "0"));
    for (int i = 0; i < 2000; ++i) {
      auto ev = ReadSmallFile(freezer_dir_ + "/cgroup.events");
      if (!ev.ok() || KeyedValue(*ev, "frozen") == (frozen ? 1u : 0u)) return absl::OkStatus();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return absl::DeadlineExceededError("cgroup did not settle in freeze state");
  }
  const char* want = frozen ? "FROZEN" : "THAWED";
  RETURN_IF_ERROR(WriteSmallFile(freezer_dir_ + "/freezer.state", want));
  for (int i = 0; i < 10000; ++i) {
    auto st = ReadSmallFile(freezer_dir_ + "/freezer.state");
    if (!st.ok() || absl::StripAsciiWhitespace(*st) == want) return absl::OkStatus();
    // The v1 freezer makes one pass per write: a task that was busy (forking, in a syscall)
    // keeps the group in FREEZING until the state is written again.
    if (i % 20 == 19) (void)WriteSmallFile(freezer_dir_ + "/freezer.state", want);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  // Never leave a group half-frozen: cancel a freeze that did not complete.
  if (frozen) (void)WriteSmallFile(freezer_dir_ + "/freezer.state", "THAWED");
  return absl::DeadlineExceededError(absl::StrCat("freezer did not reach ", want));
}

int SandboxCgroup::KillAll() {
  if (pure_v2_) {
    if (WriteSmallFile(unified_dir_ + "/cgroup.kill", "1").ok()) return 1;
    (void)Freeze(false);
    return KillProcs(unified_dir_);
  }
  int n = 0;
  if (!unified_dir_.empty() && WriteSmallFile(unified_dir_ + "/cgroup.kill", "1").ok()) n = 1;
  n += KillProcs(memory_dir_);
  (void)WriteSmallFile(freezer_dir_ + "/freezer.state", "THAWED");
  return n;
}

absl::Status SandboxCgroup::Remove() {
  absl::Status first;
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    absl::Status s = RmdirRetry(*it);
    if (!s.ok() && first.ok()) first = s;
  }
  removed_ = true;
  return first;
}

}  // namespace flotilla::sandbox
