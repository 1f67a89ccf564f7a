#include "runtime_impl.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "init_protocol.h"
#include "sys_util.h"
#include "user_namespace.h"

#ifndef PR_SCHED_CORE
#define PR_SCHED_CORE 62
#endif

namespace flotilla::sandbox {
namespace {

int64_t NowNs() { return SystemClock::Get().NowNanos(); }

std::string OwnStartTime() {
  auto stat = ReadSmallFile("/proc/self/stat");
  if (!stat.ok()) return "";
  size_t p = stat->rfind(')');
  std::vector<std::string> f = absl::StrSplit(stat->substr(p + 2), ' ');
  return f.size() > 19 ? f[19] : "";
}

class WatchHandle final : public Watch {
 public:
  WatchHandle(RuntimeImpl* rt, uint64_t token) : rt_(rt), token_(token) {}
  ~WatchHandle() override { rt_->Unsubscribe(token_); }

 private:
  RuntimeImpl* rt_;
  uint64_t token_;
};

}  // namespace

std::string_view StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kNone: return "none";
    case StopReason::kTimeout: return "timeout";
    case StopReason::kOom: return "oom";
    case StopReason::kPids: return "pids";
    case StopReason::kPolicy: return "policy";
    case StopReason::kOutputLimit: return "output_limit";
    case StopReason::kSandboxDied: return "sandbox_died";
    case StopReason::kSandboxBroken: return "sandbox_broken";
    case StopReason::kNodeLost: return "node_lost";
    case StopReason::kDestroyed: return "destroyed";
    case StopReason::kDiskFull: return "disk_full";
  }
  return "unknown";
}

std::string_view EventKindName(SandboxEvent::Kind k) {
  switch (k) {
    case SandboxEvent::Kind::kCreated: return "created";
    case SandboxEvent::Kind::kDestroyed: return "destroyed";
    case SandboxEvent::Kind::kCrashed: return "crashed";
    case SandboxEvent::Kind::kPaused: return "paused";
    case SandboxEvent::Kind::kResumed: return "resumed";
  }
  return "unknown";
}

int Sandbox::OpenRoot() const {
  return ::open(absl::StrCat("/proc/", pid, "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int Sandbox::OpenLayer() const {
  return ::open(absl::StrCat("/proc/", pid, "/fd/", layer_fd_in_init).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  return RuntimeImpl::Open(options);
}

absl::StatusOr<std::unique_ptr<Runtime>> RuntimeImpl::Open(const RuntimeOptions& options) {
  if (::geteuid() != 0) return absl::UnavailableError("the sandbox runtime needs root (it maps user namespaces)");
  if (options.state_dir.empty() || options.state_dir[0] != '/') {
    return absl::InvalidArgumentError("state_dir: must be an absolute path, got '" + options.state_dir + "'");
  }
  if (options.state_dir.find_first_of(",:\\ ") != std::string::npos) {
    return absl::InvalidArgumentError("state_dir: must not contain ',', ':', '\\' or spaces (overlayfs options)");
  }
  if (!IsSafeId(options.cgroup_prefix)) {
    return absl::InvalidArgumentError("cgroup_prefix: bad name '" + options.cgroup_prefix + "'");
  }
  std::unique_ptr<RuntimeImpl> rt(new RuntimeImpl());
  rt->options_ = options;
  // Each sandbox holds a few descriptors here (channel, pidfd, BPF links, seccomp listener).
  struct rlimit nofile;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  ASSIGN_OR_RETURN(CgroupDriver driver, CgroupDriver::Detect());
  rt->cgroups_ = std::make_unique<CgroupDriver>(driver);
  rt->features_.cgroup_v2_controllers = driver.pure_v2();
  rt->features_.cgroup_v1 = !driver.pure_v2();
  rt->features_.cgroup_v2_unified = driver.has_unified();
  rt->features_.cpuset = driver.has_cpuset();
  if (!driver.has_cpuset()) rt->features_.detail += "cpuset: no controller; sandboxes are not pinned to a partition\n";
  uint64_t cookie = 0;
  rt->features_.core_scheduling = ::prctl(PR_SCHED_CORE, 0, 0, 0, reinterpret_cast<unsigned long>(&cookie)) == 0;
  if (!rt->features_.core_scheduling) rt->features_.detail += "core scheduling: not supported by this kernel\n";
  if (!driver.has_unified()) rt->features_.detail += "cgroup v2: none mounted; eBPF network policy unavailable\n";
  if (driver.has_unified() && options.favor_cgroup_migrations) {
    auto favored = FavorCgroupMigrations(driver.v2_mount());
    if (!favored.ok()) {
      FLOG(warn, "cgroup favordynmods not set", {{"error", std::string(favored.status().message())}});
    }
    rt->features_.cgroup_favordynmods = favored.ok() && *favored;
  }
  if (!rt->features_.cgroup_favordynmods) {
    rt->features_.detail += "cgroup favordynmods: off; each sandbox start waits for an RCU grace period\n";
  }

  // The enforcers load on threads of their own (the eBPF programs, the default policy) while
  // the rest of Open runs.
  ASSIGN_OR_RETURN(rt->enforcement_, PolicyEnforcement::Create(options));
  // The two directories every sandbox mounts its layers on, each in its own mount namespace:
  // made once per state dir, shared by every runtime on it.
  rt->layer_dir_ = options.state_dir + "/mnt/layer";
  rt->root_dir_ = options.state_dir + "/mnt/root";
  struct stat st;
  if (::stat(rt->root_dir_.c_str(), &st) != 0 || ::stat(rt->layer_dir_.c_str(), &st) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(rt->layer_dir_, ec);
    std::filesystem::create_directories(rt->root_dir_, ec);
    if (ec) return absl::InternalError("creating " + options.state_dir + "/mnt: " + ec.message());
  }
  if (options.cleanup_leftovers) {
    auto report = rt->CleanupLeftovers();
    if (!report.ok()) FLOG(warn, "leftover cleanup failed", {{"error", std::string(report.status().message())}});
  }
  // "i<pid>-<start time>-<n>": whether its owner still runs can be told from the name alone.
  static std::atomic<int> instances{0};
  rt->instance_ = absl::StrCat("i", ::getpid(), "-", OwnStartTime(), "-", instances.fetch_add(1));
  // The prefix group and the first sandbox's cgroups are made meanwhile on a thread.
  absl::Status groups_made;
  std::thread groups([&] {
    groups_made = driver.EnsureGroup(options.cgroup_prefix);
    if (groups_made.ok()) rt->MakeSpareCgroup();
  });
  struct Joiner {
    std::thread& t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } join_groups{groups};

  ASSIGN_OR_RETURN(rt->userns_, CreateUserNamespace(options.host_uid_base));
  // The zygotes are forked now, while this process is small (before the image layers load; the
  // zygote closes every descriptor but its channel and never touches the other threads' data).
  RuntimeImpl* raw = rt.get();
  rt->zygote_count_ = options.warm_pool_size > 0 ? kZygotes : 1;
  rt->spawner_ = std::thread([raw] { raw->SpawnerLoop(); });
  {
    std::unique_lock<std::mutex> lock(rt->spawn_mu_);
    rt->spawn_cv_.wait(lock, [&] { return rt->zygote_known_; });
    RETURN_IF_ERROR(rt->zygote_started_);
  }
  auto images = ImageStore::Open(options.image_dir.empty() ? options.state_dir : options.image_dir,
                                 rt->userns_.get(), options.host_uid_base);
  if (!images.ok()) return images.status();
  rt->images_ = std::move(*images);
  // Probe id-mapped mounts now, so that a host without them fails at Open, not at Create.
  auto probe = rt->images_->Resolve("default");
  if (!probe.ok()) {
    return absl::UnavailableError(absl::StrCat("id-mapped overlay lower layers unavailable: ", probe.status().message()));
  }
  rt->features_.idmapped_mounts = true;
  groups.join();
  RETURN_IF_ERROR(groups_made);

  rt->epoll_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  rt->wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!rt->epoll_.valid() || !rt->wake_.valid()) return ErrnoStatus("epoll/eventfd");
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.fd = rt->wake_.get();
  ::epoll_ctl(rt->epoll_.get(), EPOLL_CTL_ADD, rt->wake_.get(), &ev);
  rt->monitor_ = std::thread([raw] { raw->MonitorLoop(); });
  if (options.prepare_ahead) rt->preparer_ = std::thread([raw] { raw->PreparerLoop(); });
  if (options.warm_pool_size > 0) {
    // Resets overlap: most of one is waiting for the old init's exit to take its mount tree
    // and namespaces down (RCU grace periods), and the clones are spread over the zygotes.
    std::lock_guard<std::mutex> lock(rt->pool_mu_);
    for (int i = 0; i < 4; ++i) rt->recyclers_.emplace_back([raw, i] { raw->RecyclerLoop(i == 0); });
  }
  return std::unique_ptr<Runtime>(std::move(rt));
}

RuntimeImpl::~RuntimeImpl() {
  // The preparer goes first (a sandbox it is starting needs the zygote), then the zygote: the
  // spawner thread reaps it while the sandboxes are torn down here.
  std::vector<std::shared_ptr<Sandbox>> ahead = StopPreparer();
  for (std::shared_ptr<Sandbox>& sb : StopRecycler()) ahead.push_back(std::move(sb));
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    zygote_closing_ = true;
  }
  spawn_cv_.notify_all();
  std::vector<std::shared_ptr<Sandbox>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sb] : sandboxes_) left.push_back(sb);
  }
  // Every init is killed before the first teardown waits: their exits overlap.
  for (const auto* all : {&left, &ahead}) {
    for (const auto& sb : *all) {
      if (sb->pidfd.valid()) ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
    }
  }
  for (const auto& sb : left) (void)Destroy(sb->id);
  for (const auto& sb : ahead) Teardown(*sb);
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    stopping_ = true;
  }
  if (wake_.valid()) {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
  }
  if (monitor_.joinable()) monitor_.join();
  spare_cgroup_.reset();
  images_.reset();
  // The last runtime of a prefix takes the empty parent away, unless it is kept for the next.
  if (cgroups_ && !options_.keep_cgroup_prefix) cgroups_->RemoveIfEmpty(options_.cgroup_prefix);
  if (spawner_.joinable()) spawner_.join();
}

std::string RuntimeImpl::CgroupName(const std::string& id) const { return instance_ + "." + id; }

absl::StatusOr<Zygote::Spawned> RuntimeImpl::Spawn(const InitPlan& plan, size_t* slot) {
  // A free zygote if there is one (starts overlap: each clone waits for its zygote's turn on
  // a CPU), else the next in turn.
  const size_t first = next_zygote_.fetch_add(1) % zygote_count_;
  std::unique_lock<std::mutex> zlock;
  for (size_t i = 0; i < zygote_count_ && !zlock.owns_lock(); ++i) {
    *slot = (first + i) % zygote_count_;
    zlock = std::unique_lock<std::mutex>(zygotes_[*slot].mu, std::try_to_lock);
  }
  if (!zlock.owns_lock()) {
    *slot = first;
    zlock = std::unique_lock<std::mutex>(zygotes_[*slot].mu);
  }
  std::unique_ptr<Zygote>& zygote = zygotes_[*slot].zygote;
  if (zygote == nullptr) {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    return zygote_started_;
  }
  absl::StatusOr<Zygote::Spawned> result = zygote->Spawn(plan);
  if (absl::IsUnavailable(result.status())) {
    // The zygote is gone (killed from outside). This Create fails (its plan may have reached
    // an init already); the next one gets a new zygote, forked by the spawner thread.
    std::unique_lock<std::mutex> lock(spawn_mu_);
    spawn_cv_.wait(lock, [&] { return !restart_zygote_; });  // one restart at a time
    restart_zygote_ = true;
    restart_slot_ = *slot;
    spawn_cv_.notify_all();
    spawn_cv_.wait(lock, [&] { return !restart_zygote_; });
  }
  return result;
}

void RuntimeImpl::PrepareNext(size_t slot) {
  std::lock_guard<std::mutex> zlock(zygotes_[slot].mu);
  // A zygote that is gone is replaced by the next Spawn.
  if (zygotes_[slot].zygote != nullptr) (void)zygotes_[slot].zygote->Prepare();
}

void RuntimeImpl::SpawnerLoop() {
  absl::Status started = absl::OkStatus();
  for (size_t i = 0; i < zygote_count_; ++i) {
    ZygoteSlot& z = zygotes_[i];
    auto zygote = Zygote::Start(userns_.get(), options_.zygote_binary);
    if (!zygote.ok()) {
      started = zygote.status();
      break;
    }
    z.zygote = std::move(*zygote);
  }
  std::unique_lock<std::mutex> lock(spawn_mu_);
  zygote_known_ = true;
  zygote_started_ = started;
  spawn_cv_.notify_all();
  for (;;) {
    spawn_cv_.wait(lock, [&] { return zygote_closing_ || restart_zygote_; });
    if (!restart_zygote_) break;
    std::unique_ptr<Zygote>& zygote = zygotes_[restart_slot_].zygote;
    lock.unlock();
    zygote.reset();
    auto again = Zygote::Start(userns_.get(), options_.zygote_binary);
    lock.lock();
    if (again.ok()) {
      zygote = std::move(*again);
    } else {
      zygote_started_ = again.status();
    }
    restart_zygote_ = false;
    spawn_cv_.notify_all();
  }
  lock.unlock();
  for (ZygoteSlot& z : zygotes_) z.zygote.reset();  // by the thread that forked them
}

absl::StatusOr<std::shared_ptr<Sandbox>> RuntimeImpl::Find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return absl::NotFoundError("no sandbox '" + id + "'");
  return it->second;
}

absl::StatusOr<std::shared_ptr<Sandbox>> RuntimeImpl::FindRunning(const std::string& id) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, Find(id));
  std::lock_guard<std::mutex> lock(sb->mu);
  if (sb->dead) {
    return absl::FailedPreconditionError(absl::StrCat("sandbox '", id, "' is not running (",
                                                      std::string(StopReasonName(sb->death_reason)), ")"));
  }
  return sb;
}

absl::StatusOr<CreateResult> RuntimeImpl::Create(const SandboxOptions& options) {
  Stopwatch watch;
  // Counted as demand on the warm pool until it returns (WantOneMore).
  struct InFlight {
    std::atomic<size_t>& n;
    explicit InFlight(std::atomic<size_t>& count) : n(count) { n.fetch_add(1); }
    ~InFlight() { n.fetch_sub(1); }
  } in_flight(creates_in_flight_);
  std::shared_ptr<Sandbox> sb = TakeWarm(options);
  const bool reused = sb != nullptr;
  if (sb == nullptr && options.id.empty()) sb = TakeStartedAhead(options);
  const bool started_ahead = sb != nullptr && !reused;
  if (sb == nullptr) {
    // A runtime-chosen id takes the cgroups made ahead for it, when there are some.
    std::string id = options.id;
    std::unique_ptr<SandboxCgroup> spare = id.empty() ? TakeSpareCgroup(&id) : nullptr;
    if (id.empty()) id = NewId("sbx");
    if (!IsSafeId(id)) return absl::InvalidArgumentError("id: bad sandbox id '" + id + "'");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (sandboxes_.count(id) || creating_.count(id)) return absl::AlreadyExistsError("sandbox '" + id + "' exists");
      creating_[id] = true;
    }
    auto built = Build(options, id, std::move(spare));
    if (!built.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      creating_.erase(id);
      return built.status();
    }
    sb = std::move(*built);
  }
  sb->options = options;  // a sandbox started ahead takes this call's labels
  sb->created_unix_ms = SystemClock::Get().WallMillis();
  if (sb->limits.timeout_ms) sb->deadline_ns = NowNs() + int64_t{sb->limits.timeout_ms} * 1'000'000;
  {
    std::lock_guard<std::mutex> lock(mu_);
    creating_.erase(sb->id);
    sb->registered = true;  // the monitor reaps it from now on (WatchInit, just below)
    sandboxes_[sb->id] = sb;
    in_use_.store(sandboxes_.size());
  }
  WatchInit(sb);
  WantAhead(options);
  CreateResult result;
  result.id = sb->id;
  result.enforcers_active = sb->enforcement->active();
  result.enforcers_inactive = sb->enforcement->inactive();
  result.core_scheduling = features_.core_scheduling;
  if (!features_.core_scheduling) result.enforcers_inactive.push_back("core-scheduling: not supported by this kernel");
  result.started_ahead = started_ahead;
  result.reused = reused;
  result.create_ms = watch.ElapsedMillis();
  Time(reused ? &RuntimeTimings::create_warm : &RuntimeTimings::create_cold, result.create_ms);
  Emit(MakeEvent(sb->id, SandboxEvent::Kind::kCreated));
  return result;
}

absl::StatusOr<std::shared_ptr<Sandbox>> RuntimeImpl::Build(const SandboxOptions& options, const std::string& id,
                                                            std::unique_ptr<SandboxCgroup> cgroup) {
  auto sb = std::make_shared<Sandbox>();
  sb->id = id;
  sb->options = options;
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(sb->enforcement, enforcement_->Prepare(options, &sb->policy));
    const ResourceLimits& r = options.resources;
    const PolicyLimits& p = sb->policy;
    auto pick = [](auto a, auto b, auto c) { return a ? a : (b ? b : c); };
    sb->limits.memory_bytes = pick(r.memory_bytes, p.memory_bytes, options_.default_memory_bytes);
    sb->limits.pids = pick(r.pids, p.pids, options_.default_pids);
    sb->limits.cpu_weight = pick(r.cpu_weight, p.cpu_weight, 100u);
    sb->limits.cpu_quota_millicores = pick(r.cpu_quota_millicores, p.cpu_quota_millicores, 0u);
    sb->limits.disk_bytes = pick(r.disk_bytes, p.disk_bytes, options_.default_disk_bytes);
    sb->limits.timeout_ms = pick(r.timeout_ms, p.sandbox_timeout_ms, 0u);
    sb->limits.cpus = r.cpus;
    sb->limits.mems = r.mems;
    if (sb->limits.cpu_weight > 10000) return absl::InvalidArgumentError("resources.cpu_weight: must be 1..10000");
    if (sb->limits.cpu_quota_millicores > kMaxCpuQuotaMillicores) {
      return absl::InvalidArgumentError(
          absl::StrCat("resources.cpu_quota_millicores: at most ", kMaxCpuQuotaMillicores));
    }
    if (sb->limits.disk_bytes < (1u << 20)) return absl::InvalidArgumentError("resources.disk_bytes: at least 1 MiB");
    if (sb->limits.memory_bytes < (8u << 20)) return absl::InvalidArgumentError("resources.memory_bytes: at least 8 MiB");
    sb->execution_class = options.execution_class;
    ASSIGN_OR_RETURN(ResolvedImage image, images_->Resolve(options.image));
    sb->image_top = image.top;
    sb->has_usr_layer = !image.usr_lowers.empty();
    CgroupLimits cl{.memory_bytes = sb->limits.memory_bytes, .pids = sb->limits.pids,
                    .cpu_weight = sb->limits.cpu_weight, .cpu_quota_millicores = sb->limits.cpu_quota_millicores,
                    .cpus = sb->limits.cpus, .mems = sb->limits.mems};
    if (cgroup != nullptr) {
      sb->cgroup = std::move(cgroup);
      RETURN_IF_ERROR(cgroups_->Limit(*sb->cgroup, cl));
    } else {
      ASSIGN_OR_RETURN(sb->cgroup, cgroups_->Create(options_.cgroup_prefix, CgroupName(id), cl));
    }
    return Start(*sb, image);
  }();
  if (!s.ok()) {
    Teardown(*sb);
    return s;
  }
  return sb;
}

absl::Status RuntimeImpl::Start(Sandbox& sb, const ResolvedImage& image, bool attach) {
  // Every sandbox mounts its layers on the same two directories, each in its own mount
  // namespace: nothing per sandbox (or per runtime) is created on the host's filesystem.
  const std::string& rw = layer_dir_;
  const std::string& root = root_dir_;
  Stopwatch phase;
  // The writable layer: a size-limited tmpfs, created detached so it never shows in the host's
  // mount table; init attaches it inside its own mount namespace.
  {
    UniqueFd fsfd(::fsopen("tmpfs", FSOPEN_CLOEXEC));
    if (!fsfd.valid()) return ErrnoStatus("fsopen tmpfs");
    std::string size = absl::StrCat(sb.limits.disk_bytes);
    if (::fsconfig(fsfd.get(), FSCONFIG_SET_STRING, "size", size.c_str(), 0) != 0 ||
        ::fsconfig(fsfd.get(), FSCONFIG_SET_STRING, "mode", "0700", 0) != 0 ||
        ::fsconfig(fsfd.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
      return ErrnoStatus("configure writable layer tmpfs");
    }
    sb.layer.Reset(::fsmount(fsfd.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
    if (!sb.layer.valid()) return ErrnoStatus("fsmount writable layer");
    const uint32_t base = options_.host_uid_base;
    for (const char* d : {"upper", "work", "usr-upper", "usr-work"}) {
      if (::mkdirat(sb.layer.get(), d, 0755) != 0) return ErrnoStatus(absl::StrCat("mkdir layer ", d));
    }
    if (::fchownat(sb.layer.get(), "upper", base, base, 0) != 0 ||
        ::fchownat(sb.layer.get(), "usr-upper", base, base, 0) != 0) {
      return ErrnoStatus("chown writable layer");
    }
  }
  Time(&RuntimeTimings::start_layer, phase.ElapsedMillis());
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair");
  sb.control.Reset(sv[0]);
  UniqueFd child_end(sv[1]);

  InitPlan plan;
  plan.control_fd = child_end.get();
  plan.tmpfs_fd = sb.layer.get();
  // The image's layers are detached mounts: init names them by its descriptors for them.
  auto lowers = [&plan](const std::vector<int>& fds) {
    std::string dirs;
    for (int fd : fds) {
      if (!dirs.empty()) dirs += ':';
      dirs += InitStep::kLayerFdMark;
      dirs += static_cast<char>(plan.layer_fds.size() + 1);
      plan.layer_fds.push_back(fd);
    }
    return dirs;
  };
  plan.rw_dir = rw;
  plan.root_dir = root;
  plan.cgroup_procs = sb.cgroup->procs_files();
  plan.hostname = sb.id.substr(0, 63);
  // A best-effort init is moved to SCHED_IDLE from outside once it is ready (below), not by
  // itself during set-up: on a loaded host an idle-class init would wait behind every runnable
  // task before it could report ready, and the Create with it. No command can run before.
  plan.sched_idle = false;
  plan.core_sched = features_.core_scheduling;
  plan.keep_caps = DefaultKeptCapabilities();
  using K = InitStep::Kind;
  auto mount = [&](std::string src, std::string target, std::string type, unsigned long flags, std::string data,
                   bool optional = false) {
    InitStep st;
    st.kind = K::kMount;
    st.source = std::move(src);
    st.target = std::move(target);
    st.fstype = std::move(type);
    st.data = std::move(data);
    st.flags = flags;
    st.optional = optional;
    plan.steps.push_back(std::move(st));
  };
  auto mkdir = [&](std::string target, unsigned mode) {
    InitStep st;
    st.kind = K::kMkdir;
    st.target = std::move(target);
    st.mode = mode;
    plan.steps.push_back(std::move(st));
  };
  const unsigned long nosuid = MS_NOSUID | MS_NODEV;
  mount("overlay", root, "overlay", nosuid,
        absl::StrCat("lowerdir=", lowers(image.root_lowers), ",upperdir=", rw, "/upper,workdir=", rw,
                     "/work,xino=off,index=off,redirect_dir=off,metacopy=off"));
  if (!image.usr_lowers.empty()) {
    mount("overlay", root + "/usr", "overlay", nosuid,
          absl::StrCat("lowerdir=", lowers(image.usr_lowers), ",upperdir=", rw, "/usr-upper,workdir=",
                       rw, "/usr-work,xino=off,index=off,redirect_dir=off,metacopy=off"));
  }
  mkdir(root + "/proc", 0555);
  mkdir(root + "/dev", 0755);
  mount("proc", root + "/proc", "proc", nosuid | MS_NOEXEC, "");
  for (const char* f : {"kcore", "keys", "timer_list", "sched_debug", "latency_stats", "timer_stats", "kallsyms",
                        "kpagecount", "kpageflags", "kpagecgroup", "sysrq-trigger", "config.gz"}) {
    mount("/dev/null", root + "/proc/" + f, "", MS_BIND, "", true);
  }
  for (const char* d : {"acpi", "scsi", "driver"}) {
    mount("tmpfs", root + "/proc/" + d, "tmpfs", nosuid | MS_NOEXEC | MS_RDONLY, "size=0", true);
  }
  for (const char* d : {"sys", "irq", "bus", "fs"}) {
    mount(root + "/proc/" + d, root + "/proc/" + d, "", MS_BIND | MS_REC, "", true);
    mount("", root + "/proc/" + d, "", MS_BIND | MS_REMOUNT | MS_RDONLY | nosuid | MS_NOEXEC, "", true);
  }
  mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k,nr_inodes=4096");
  struct Node {
    const char* name;
    unsigned major, minor;
  };
  for (Node n : {Node{"null", 1, 3}, Node{"zero", 1, 5}, Node{"full", 1, 7}, Node{"random", 1, 8},
                 Node{"urandom", 1, 9}, Node{"tty", 5, 0}}) {
    InitStep st;
    st.kind = K::kMknod;
    st.target = root + "/dev/" + n.name;
    st.mode = S_IFCHR | 0666;
    st.dev = makedev(n.major, n.minor);
    plan.steps.push_back(std::move(st));
  }
  mkdir(root + "/dev/pts", 0755);
  mkdir(root + "/dev/shm", 01777);
  mkdir(root + "/dev/mqueue", 01777);
  mount("devpts", root + "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  for (auto [target, link] : {std::pair<const char*, const char*>{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"},
                              {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
                              {"/proc/self/fd/2", "stderr"}}) {
    InitStep st;
    st.kind = K::kSymlink;
    st.source = target;
    st.target = root + "/dev/" + link;
    plan.steps.push_back(std::move(st));
  }
  sb.enforcement->AddChildHooks(&plan);

  phase.Reset();
  size_t zygote = 0;
  ASSIGN_OR_RETURN(Zygote::Spawned spawned, Spawn(plan, &zygote));
  Time(&RuntimeTimings::start_spawn, phase.ElapsedMillis());
  phase.Reset();
  sb.pid = spawned.pid;
  sb.pidfd = std::move(spawned.pidfd);
  child_end.Reset();
  // While init sets itself up: it runs no command before it reports ready.
  if (attach) RETURN_IF_ERROR(sb.enforcement->AttachToCgroup(sb.cgroup->unified_dir()));
  RETURN_IF_ERROR(WaitReady(sb));
  Time(&RuntimeTimings::start_setup, phase.ElapsedMillis());
  if (sb.execution_class == ExecutionClass::kBestEffort) {
    struct sched_param idle {};
    if (::sched_setscheduler(sb.pid, SCHED_IDLE, &idle) != 0) return ErrnoStatus("SCHED_IDLE for the sandbox's init");
  }
  if (options_.prepare_ahead) PrepareNext(zygote);
  sb.layer_fd_in_init = spawned.layer_fd_in_init;
  sb.layer.Reset();
  return sb.enforcement->AfterStart();
}

absl::Status RuntimeImpl::WaitReady(Sandbox& sb) {
  struct pollfd pfd {sb.control.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&pfd, 1, 10000);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return absl::DeadlineExceededError("sandbox init did not report ready within 10 s");
  char buf[1024];
  ssize_t n = ::recv(sb.control.get(), buf, sizeof(buf), 0);
  if (n < static_cast<ssize_t>(sizeof(InitHeader))) return absl::InternalError("sandbox init exited during set-up");
  InitHeader h;
  std::memcpy(&h, buf, sizeof(h));
  if (h.type == InitMsg::kReady) return absl::OkStatus();
  std::string text(buf + sizeof(h), std::min<size_t>(h.payload_len, static_cast<size_t>(n) - sizeof(h)));
  absl::Status err = ErrnoStatus("sandbox set-up", h.arg);
  return absl::Status(err.code(), "sandbox set-up failed: " + text);
}

void RuntimeImpl::KillAndWait(Sandbox& sb) {
  if (sb.pidfd.valid() && sb.execution_class == ExecutionClass::kBestEffort) {
    // init's exit takes its namespaces down (mount tree, pid namespace): at normal priority,
    // not behind every other runnable task as SCHED_IDLE would. Only while init is unreaped,
    // so that its pid names it.
    std::lock_guard<std::mutex> lock(sb.mu);
    struct sched_param normal {};
    if (!sb.reaped) (void)::sched_setscheduler(sb.pid, SCHED_OTHER, &normal);
  }
  if (sb.pidfd.valid()) {
    if (sb.paused.load() && sb.cgroup) (void)sb.cgroup->Freeze(false);
    ::syscall(SYS_pidfd_send_signal, sb.pidfd.get(), SIGKILL, nullptr, 0);
  }
  if (sb.cgroup) sb.cgroup->KillAll();
  if (sb.pidfd.valid()) {
    // The pidfd turns readable once init has exited: its pid namespace is empty by then and
    // it has left its cgroups. The monitor reaps it meanwhile (registered sandboxes), while the
    // programs are detached and the cgroups removed here.
    struct pollfd exited {sb.pidfd.get(), POLLIN, 0};
    while (::poll(&exited, 1, 10000) < 0 && errno == EINTR) {
    }
  }
}

void RuntimeImpl::Teardown(Sandbox& sb) {
  KillAndWait(sb);
  sb.enforcement.reset();
  if (sb.cgroup) {
    absl::Status s = sb.cgroup->Remove();
    if (!s.ok()) FLOG(warn, "sandbox cgroup removal failed", {{"id", sb.id}, {"error", std::string(s.message())}});
  }
  if (sb.pidfd.valid()) {
    // Reaped by the monitor (registered sandboxes, which it answers for once registered) or
    // here (failed creates); either way before the pidfd closes.
    if (sb.registered) {
      std::unique_lock<std::mutex> lock(sb.mu);
      sb.cv.wait_for(lock, std::chrono::seconds(10), [&] { return sb.dead; });
    } else {
      std::lock_guard<std::mutex> lock(sb.mu);
      siginfo_t info;
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(sb.pidfd.get()), &info, WEXITED);
      sb.reaped = true;
    }
  }
  sb.control.Reset();
  sb.layer.Reset();
  sb.pidfd.Reset();
}

absl::Status RuntimeImpl::Destroy(const std::string& id) {
  std::shared_ptr<Sandbox> sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) return absl::NotFoundError("no sandbox '" + id + "'");
    sb = it->second;
    sandboxes_.erase(it);
    in_use_.store(sandboxes_.size());
  }
  sb->destroying = true;
  Stopwatch watch;
  // One that ended cleanly goes back to the warm pool (reset there), any other is torn down.
  if (!ReturnToPool(sb)) Teardown(*sb);
  Time(&RuntimeTimings::destroy, watch.ElapsedMillis());
  Emit(MakeEvent(id, SandboxEvent::Kind::kDestroyed, StopReason::kDestroyed));
  return absl::OkStatus();
}

void RuntimeImpl::WatchInit(const std::shared_ptr<Sandbox>& sb) {
  {
    std::lock_guard<std::mutex> lock(monitor_mu_);
    watched_[sb->pidfd.get()] = sb;
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.fd = sb->pidfd.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sb->pidfd.get(), &ev);
  if (sb->deadline_ns) {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
  }
}

void RuntimeImpl::MonitorLoop() {
  for (;;) {
    int64_t now = NowNs(), next = 0;
    std::vector<std::shared_ptr<Sandbox>> expired;
    {
      std::lock_guard<std::mutex> lock(monitor_mu_);
      for (auto& [fd, weak] : watched_) {
        auto sb = weak.lock();
        if (!sb || !sb->deadline_ns || sb->timed_out) continue;
        if (sb->deadline_ns <= now) {
          expired.push_back(sb);
        } else if (!next || sb->deadline_ns < next) {
          next = sb->deadline_ns;
        }
      }
    }
    for (auto& sb : expired) {
      sb->timed_out = true;
      if (sb->paused) (void)sb->cgroup->Freeze(false);
      ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
    }
    int timeout = next ? static_cast<int>(std::max<int64_t>(1, (next - now) / 1'000'000 + 1)) : -1;
    struct epoll_event evs[64];
    int n = ::epoll_wait(epoll_.get(), evs, 64, timeout);
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == wake_.get()) {
        uint64_t v;
        (void)!::read(wake_.get(), &v, sizeof(v));
        std::lock_guard<std::mutex> lock(spawn_mu_);
        if (stopping_) return;
        continue;
      }
      std::shared_ptr<Sandbox> sb;
      {
        std::lock_guard<std::mutex> lock(monitor_mu_);
        auto it = watched_.find(fd);
        if (it == watched_.end()) continue;
        sb = it->second.lock();
        watched_.erase(it);
      }
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      if (sb) OnInitExit(sb);
    }
  }
}

void RuntimeImpl::OnInitExit(const std::shared_ptr<Sandbox>& sb) {
  siginfo_t info{};
  {
    std::lock_guard<std::mutex> lock(sb->mu);
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(sb->pidfd.get()), &info, WEXITED);
    sb->reaped = true;
  }
  StopReason reason = StopReason::kSandboxDied;
  std::string detail = absl::StrCat("init exited (", info.si_code == CLD_EXITED ? "status " : "signal ",
                                    info.si_status, ")");
  if (sb->destroying) {
    reason = StopReason::kDestroyed;
  } else if (sb->timed_out) {
    reason = StopReason::kTimeout;
    detail = absl::StrCat("sandbox wall-clock limit of ", sb->limits.timeout_ms, " ms reached");
  } else if (sb->cgroup->Counters().oom_kills > 0 && info.si_status == SIGKILL) {
    reason = StopReason::kOom;
    detail = "init was killed by the memory limit";
  }
  {
    std::lock_guard<std::mutex> lock(sb->mu);
    sb->dead = true;
    sb->death_reason = reason;
    sb->death_detail = detail;
  }
  sb->cv.notify_all();
  if (!sb->destroying) Emit(MakeEvent(sb->id, SandboxEvent::Kind::kCrashed, reason, detail));
}

void RuntimeImpl::Time(PhaseTiming RuntimeTimings::*phase, double ms) {
  std::lock_guard<std::mutex> lock(timings_mu_);
  PhaseTiming& t = timings_.*phase;
  ++t.count;
  t.ms += ms;
}

RuntimeTimings RuntimeImpl::Timings() const {
  std::lock_guard<std::mutex> lock(timings_mu_);
  return timings_;
}

void RuntimeImpl::Emit(SandboxEvent event) {
  if (event.unix_ms == 0) event.unix_ms = SystemClock::Get().WallMillis();
  std::lock_guard<std::mutex> lock(watch_mu_);
  for (auto& [token, sub] : subscribers_) {
    if (sub.first.empty() || sub.first == event.sandbox_id) sub.second(event);
  }
}

std::unique_ptr<Watch> RuntimeImpl::WatchEvents(const std::string& id, EventCallback callback) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  uint64_t token = next_token_++;
  subscribers_[token] = {id, std::move(callback)};
  return std::make_unique<WatchHandle>(this, token);
}

void RuntimeImpl::Unsubscribe(uint64_t token) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  subscribers_.erase(token);
}

SandboxInfo RuntimeImpl::InfoOf(const Sandbox& sb) const {
  SandboxInfo info;
  info.id = sb.id;
  info.labels = sb.options.labels;
  info.resources = sb.limits;
  info.execution_class = sb.execution_class;
  info.paused = sb.paused;
  info.memory_used_bytes = sb.cgroup ? sb.cgroup->Counters().memory_current : 0;
  info.created_unix_ms = sb.created_unix_ms;
  return info;
}

std::vector<SandboxInfo> RuntimeImpl::List() const {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sb] : sandboxes_) all.push_back(sb);
  }
  std::vector<SandboxInfo> out;
  for (const auto& sb : all) out.push_back(InfoOf(*sb));
  return out;
}

absl::StatusOr<SandboxInfo> RuntimeImpl::Info(const std::string& id) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, Find(id));
  return InfoOf(*sb);
}

absl::Status RuntimeImpl::Pause(const std::string& id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  if (sb->paused.exchange(true)) return absl::OkStatus();
  absl::Status s = sb->cgroup->Freeze(true);
  if (!s.ok()) {
    sb->paused = false;
    return s;
  }
  Emit(MakeEvent(id, SandboxEvent::Kind::kPaused));
  return absl::OkStatus();
}

absl::Status RuntimeImpl::Resume(const std::string& id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  if (!sb->paused) return absl::OkStatus();
  RETURN_IF_ERROR(sb->cgroup->Freeze(false));
  sb->paused = false;
  Emit(MakeEvent(id, SandboxEvent::Kind::kResumed));
  return absl::OkStatus();
}

absl::StatusOr<int> RuntimeImpl::OpenNetworkNamespace(const std::string& id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  std::string path = absl::StrCat("/proc/", sb->pid, "/ns/net");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  return fd;
}

absl::StatusOr<SnapshotResult> RuntimeImpl::Snapshot(const std::string& id, const std::string& name) {
  ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, FindRunning(id));
  bool was_paused = sb->paused;
  if (!was_paused) RETURN_IF_ERROR(sb->cgroup->Freeze(true));
  UniqueFd layer(sb->OpenLayer());
  UniqueFd upper(::openat(layer.get(), "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  UniqueFd usr(sb->has_usr_layer ? ::openat(layer.get(), "usr-upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1);
  absl::StatusOr<SnapshotResult> r = upper.valid() ? images_->Commit(upper.get(), usr.get(), sb->image_top, name)
                                                   : ErrnoStatus("open writable layer");
  if (!was_paused) (void)sb->cgroup->Freeze(false);
  return r;
}

}  // namespace flotilla::sandbox
