// The node-local sandbox runtime: isolated process trees with their own root filesystem.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open({.state_dir = "/var/lib/flotilla"}));
//   ASSIGN_OR_RETURN(CreateResult c, rt->Create({.policy_name = "default"}));
//   ExecOptions ex{.argv = {"/bin/sh", "-c", "echo hi"}};
//   ASSIGN_OR_RETURN(ExecResult r, rt->Exec(c.id, ex, [](OutputStream s, std::string_view d) {...}));
//   RETURN_IF_ERROR(rt->Destroy(c.id));
//
// A sandbox is a process tree in new user (root inside = an unprivileged host uid range), pid,
// mount, network, uts, ipc and cgroup namespaces, with no_new_privs and a small capability
// bounding set. PID 1 inside is the runtime's own init: it reaps zombies and starts execs on
// request. The root filesystem is overlayfs: read-only image layers below, a per-sandbox
// size-limited writable layer above, entered with pivot_root; /proc is masked like OCI
// runtimes do, /sys is absent, /dev is minimal. Resources are enforced through cgroups (v2
// where its controllers are enabled, v1 otherwise, detected when the runtime opens).
//
// Thread-safety: every Runtime method may be called concurrently from any thread, including
// several Exec calls on one sandbox. Ownership: the Runtime owns every sandbox it created;
// destroying the Runtime destroys them all (no process, mount, cgroup, BPF link or file stays).
// Errors: NotFound for an unknown sandbox id, InvalidArgument for bad options (naming the
// field), FailedPrecondition for a sandbox that is gone or paused, Unavailable when the host
// lacks a required kernel feature, Internal for kernel calls that failed unexpectedly.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla::sandbox {

// Why the runtime stopped something, or how a sandbox broke (mirrors flotilla.v1.StopReason).
enum class StopReason {
  kNone = 0,
  kTimeout = 1,        // exec or sandbox wall-clock limit
  kOom = 2,            // memory limit
  kPids = 3,           // pids limit
  kPolicy = 4,         // a policy enforcer refused (seccomp, network, filesystem)
  kOutputLimit = 5,    // output cap reached
  kSandboxDied = 6,    // init of the sandbox exited
  kSandboxBroken = 7,  // the sandbox destroyed its own userland (e.g. no /bin/sh)
  kNodeLost = 8,       // reported by the scheduler, never by the runtime
  kDestroyed = 9,      // destroyed while running
  kDiskFull = 10,      // writable layer full
};
std::string_view StopReasonName(StopReason r);  // "timeout", "oom", ...

enum class ExecutionClass {
  kLatencySensitive,  // runs normally
  kBestEffort,        // every process SCHED_IDLE
};

// The largest CPU quota a sandbox may ask for (10,000 CPUs, policies::kMaxCpuQuota).
inline constexpr uint32_t kMaxCpuQuotaMillicores = 10'000'000;

struct ResourceLimits {
  uint64_t memory_bytes = 0;          // 0: the runtime's default
  uint32_t pids = 0;                  // 0: the runtime's default
  uint32_t cpu_weight = 0;            // 1..10000 (cgroup v2 scale); 0: default (100)
  uint32_t cpu_quota_millicores = 0;  // 0: unlimited; at most kMaxCpuQuotaMillicores
  uint64_t disk_bytes = 0;            // writable layer size; 0: the runtime's default
  uint32_t timeout_ms = 0;            // whole-sandbox wall clock; 0: none
  std::string cpus;                   // cpuset CPUs to pin to ("0-3,8"); empty: not pinned
  std::string mems;                   // cpuset memory nodes ("0"); empty: not pinned
};

struct NetworkAllow {
  std::string cidr;   // "10.0.0.0/8", "::1/128"
  uint16_t port = 0;  // 0: any
};

struct SandboxOptions {
  std::string id;     // empty: the runtime picks "sbx-<hex>"; otherwise a safe id (IsSafeId)
  std::string image;  // empty: embedded default (host /usr + generated /etc); a layer id
                      // ("sha256:..."), an image name built by BuildImage, or a directory
  std::string policy_yaml;   // full policy text; empty: policy_name
  std::string policy_name;   // "default", "no-network", "build", or a file; empty: "default"
  ResourceLimits resources;  // zero fields fall back to the policy, then the runtime defaults
  ExecutionClass execution_class = ExecutionClass::kBestEffort;
  std::map<std::string, std::string> labels;
  std::vector<NetworkAllow> extra_allow;  // added to the policy's network allow list
};

struct CreateResult {
  std::string id;
  std::vector<std::string> enforcers_active;    // "seccomp", "ebpf-net", "landlock", "apparmor"
  std::vector<std::string> enforcers_inactive;  // "apparmor: not enabled on this host"
  bool core_scheduling = false;                 // PR_SCHED_CORE cookie set for the sandbox
  double create_ms = 0;
  bool started_ahead = false;  // handed a sandbox started ahead (RuntimeOptions::start_ahead)
  bool reused = false;         // handed a reset sandbox of the warm pool (RuntimeOptions::warm_pool_size)
};

struct ExecOptions {
  std::vector<std::string> argv;           // argv[0] is the program; PATH is searched if no '/'
  std::map<std::string, std::string> env;  // empty: PATH, HOME=/root, TERM=dumb
  std::string cwd;                         // empty: "/"
  std::string stdin_data;                  // fed to the process, then stdin is closed
  uint32_t timeout_ms = 0;                 // 0: the policy's exec timeout (or none)
  uint64_t output_limit_bytes = 0;         // stdout+stderr; 0: the policy's (or none)
};

enum class OutputStream { kStdout, kStderr };
// Receives output as it arrives, on the calling thread of Exec. Never called after Exec returns.
using OutputCallback = std::function<void(OutputStream stream, std::string_view data)>;

struct ExecResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  StopReason reason = StopReason::kNone;  // set when the runtime stopped it or the sandbox broke
  std::string detail;                     // a human line about `reason`
  double wall_ms = 0;
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
};

struct FileContent {
  std::string content;
  uint32_t mode = 0;  // permission bits
};

struct SnapshotResult {
  std::string layer_id;  // "sha256:<hex>" of a canonical walk of the layer
  uint64_t bytes = 0;    // file bytes in the layer
};

struct SandboxInfo {
  std::string id;
  std::map<std::string, std::string> labels;
  ResourceLimits resources;  // effective limits
  ExecutionClass execution_class = ExecutionClass::kBestEffort;
  bool paused = false;
  uint64_t memory_used_bytes = 0;
  int64_t created_unix_ms = 0;
};

struct SandboxEvent {
  enum class Kind { kCreated = 1, kDestroyed = 2, kCrashed = 3, kPaused = 4, kResumed = 5 };
  std::string sandbox_id;
  Kind kind = Kind::kCreated;
  StopReason reason = StopReason::kNone;
  std::string detail;
  int64_t unix_ms = 0;
};
std::string_view EventKindName(SandboxEvent::Kind k);

// Called for every event of the watched sandbox (or all sandboxes), on a runtime thread; keep
// it short. Never called after the returned Watch handle is destroyed.
using EventCallback = std::function<void(const SandboxEvent&)>;

// Unsubscribes on destruction. Move-only.
class Watch {
 public:
  virtual ~Watch() = default;
};

struct CleanupReport {
  int sandboxes = 0;  // leftover sandbox state dirs removed
  int cgroups = 0;    // flotilla-* cgroups removed
  int mounts = 0;     // stale mounts under the state dir detached
  int processes = 0;  // processes killed in leftover cgroups
};

struct RuntimeOptions {
  std::string state_dir = "/var/lib/flotilla";  // layers, images, the sandboxes' mount points
  // Where image layers and names live (layers/, images/, base/), when not under state_dir:
  // runtimes with their own state dirs then share one store of built environments.
  std::string image_dir;
  // Cgroups are "<cgroup_prefix>/<instance>.<sandbox id>" (the instance names the runtime
  // process, so that a later runtime can tell a dead one's leftovers). The last runtime of a prefix removes
  // the empty "<cgroup_prefix>" parent at close, unless keep_cgroup_prefix: then it stays for
  // the next runtime (one-shot CLI runs skip making and removing it each time) until
  // RemoveNodeSharedState.
  std::string cgroup_prefix = "flotilla";
  bool keep_cgroup_prefix = false;
  uint32_t host_uid_base = 100000;  // root inside maps to this host uid (shared 65536 range)
  uint64_t default_memory_bytes = 1ull << 30;
  uint32_t default_pids = 512;
  uint64_t default_disk_bytes = 1ull << 30;
  bool cleanup_leftovers = true;  // run CleanupLeftovers() in Open
  std::string policies_dir;       // extra directory of named policies; empty: built-ins only
  // Every sandbox init is cloned by a zygote, a small process started at Open. Empty: the
  // zygote is a fork of this process (small when Open comes early, before large libraries
  // have mapped and touched their data). Else an executable that runs the zygote
  // (zygote_main.h; the `flotilla` CLI does), for processes that are already large at Open.
  std::string zygote_binary;
  // The eBPF network programs: the node's copy pinned in a bpffs of flotilla's own mounted
  // here (shared by every runtime of the node; the first one loads it, the rest open it in
  // microseconds, and its anchor keeps the kernel's cgroup hooks on between processes). Empty:
  // each runtime loads its own. `flotilla sandbox cleanup` takes the pinned copy away.
  std::string bpf_pin_dir = "/run/flotilla/bpf";
  // Set the cgroup v2 option "favordynmods" (host-wide, Linux 6.0+) at Open when it is off:
  // without it every sandbox start waits out an RCU grace period (5-20 ms) when its init joins
  // its cgroups; with it fork and exit get slightly dearer everywhere on the host.
  bool favor_cgroup_migrations = true;
  // Prepare the next sandbox's kernel objects ahead (a network namespace, its cgroup
  // directories) once each sandbox has started, while the caller runs its commands: the next
  // Create then finds them made. The first sandbox's are made during Open either way. False for
  // a runtime that creates one sandbox and closes (`flotilla sandbox run`), which would only
  // make and remove a second set.
  bool prepare_ahead = true;
  // Start whole sandboxes ahead (with prepare_ahead): for options that at least two of the
  // last eight Creates letting the runtime choose the id asked for (same options, labels
  // aside), one sandbox is kept started in the background, and the next such Create is handed
  // it (CreateResult::started_ahead) instead of waiting for a start; another is then started
  // behind it. At most start_ahead_kinds such options at once, the most recently asked for. A
  // sandbox started ahead is the same as one started on demand (its own id, cgroups,
  // namespaces, fresh writable layer, every enforcer applied); until it is handed out it is not
  // listed and has no events, and its wall-clock limit and creation time count from the Create
  // that takes it. It is destroyed when the runtime closes or when its options are no longer
  // asked for. Costs an idle sandbox (about 0.9 MiB of host memory) per kind of options.
  bool start_ahead = true;
  int start_ahead_kinds = 2;
  // The warm pool: up to this many sandboxes that ended cleanly are reset and kept for reuse
  // instead of being torn down; 0: off (every Destroy tears down). A sandbox ended cleanly when
  // its init is alive and it is not paused, broken or past its wall-clock limit, its cgroup saw
  // no OOM kill and no pids-limit hit, and its enforcers denied nothing (so a sample that
  // crashed, OOMed or was policy-killed is never reused). Destroy of such a sandbox kills every
  // process of it and returns (its id is free at once, its Destroyed event sent); a recycler
  // thread then resets it: once its init has exited (its namespaces, mount tree and writable
  // layer go with it) a new init starts in the same cgroup, under the same limits, with the
  // same network programs attached and the same policy applied again (seccomp, Landlock,
  // AppArmor), over a fresh writable layer and fresh namespaces: the image's pristine state.
  // The next Create with the same options (id and labels aside) is handed it
  // (CreateResult::reused) under the id it names (also its hostname), its wall-clock limit and
  // creation time counting from that Create. Pooled sandboxes are not listed, send no events
  // and are torn down when the runtime closes or when the pool is full; each costs an idle
  // sandbox's host memory (about 0.9 MiB). Resets run side by side: four recyclers, one more
  // whenever returned sandboxes queue up behind the busy ones (up to 32), cloning from four
  // zygotes instead of one.
  uint32_t warm_pool_size = 0;
};

// Where the runtime's time went since it opened (Runtime::Timings): per phase, how often it ran
// and its wall time summed, for telling what a sandbox's create and destroy cost is made of.
struct PhaseTiming {
  uint64_t count = 0;
  double ms = 0;
};
struct RuntimeTimings {
  PhaseTiming create_warm;    // Creates handed a reset sandbox of the warm pool
  PhaseTiming create_waited;  // ... of those, the ones that waited for a reset under way (the wait)
  PhaseTiming create_cold;    // Creates that started one of their own or were handed one started ahead
  PhaseTiming destroy;        // Destroys (a return to the warm pool or a teardown)
  PhaseTiming reset_queued;   // warm pool: a returned sandbox's wait for a free recycler
  PhaseTiming reset_exit;     // warm pool: the old init's exit (its namespaces, mounts, layer) and reap
  PhaseTiming reset_start;    // warm pool: the new init's start, until it reported ready
  PhaseTiming pool_grow;      // warm pool: sandboxes started to grow it
  PhaseTiming start_layer;    // every start: the writable layer (a detached tmpfs)
  PhaseTiming start_spawn;    // every start: the zygote's clone of init (one at a time)
  PhaseTiming start_setup;    // every start: init's set-up (mounts, pivot_root, policy) until ready
};

// What the host supports, detected when the runtime opens.
struct HostFeatures {
  bool cgroup_v2_controllers = false;  // pure v2 with memory/pids/cpu enabled
  bool cgroup_v1 = false;              // v1 memory/pids/cpu/freezer hierarchies
  bool cgroup_v2_unified = false;      // a v2 hierarchy to attach BPF programs to
  bool core_scheduling = false;        // prctl(PR_SCHED_CORE)
  bool cpuset = false;                 // a cpuset controller: sandboxes can be pinned
  bool idmapped_mounts = false;
  bool cgroup_favordynmods = false;    // cgroup migrations skip the RCU grace period
  std::string detail;                  // one line per missing feature
};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // Opens the runtime on `options.state_dir`. Unavailable when not root or when the kernel
  // lacks user namespaces, overlayfs or cgroups; the message names what is missing.
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);

  virtual const HostFeatures& features() const = 0;

  // Creates and starts a sandbox (its init is running when this returns).
  virtual absl::StatusOr<CreateResult> Create(const SandboxOptions& options) = 0;

  // Runs argv inside the sandbox and waits for it. Output is streamed to `on_output` (may be
  // null). A process the runtime stopped returns OK with result.reason set; a sandbox whose
  // init died returns OK with reason kSandboxDied. Never blocks past the timeout + 1 s.
  virtual absl::StatusOr<ExecResult> Exec(const std::string& id, const ExecOptions& options,
                                          const OutputCallback& on_output) = 0;

  // Files, resolved inside the sandbox root (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS):
  // symlinks and ".." never leave it. PutFile creates missing parent directories.
  virtual absl::Status PutFile(const std::string& id, const std::string& path,
                               std::string_view content, uint32_t mode) = 0;
  // OutOfRange when the file is larger than max_bytes (0: 64 MiB).
  virtual absl::StatusOr<FileContent> GetFile(const std::string& id, const std::string& path,
                                              uint64_t max_bytes) = 0;

  // Commits the sandbox's writable layer as a content-addressed layer; `name` (optional) names
  // it as an image for SandboxOptions::image. The sandbox keeps running.
  virtual absl::StatusOr<SnapshotResult> Snapshot(const std::string& id, const std::string& name) = 0;

  // A new descriptor (the caller closes it) of the sandbox's network namespace: a host process
  // can make sockets in it (setns on one thread) to serve the sandbox on its own loopback,
  // as image builds do for their package-mirror proxy.
  virtual absl::StatusOr<int> OpenNetworkNamespace(const std::string& id) = 0;

  virtual absl::Status Pause(const std::string& id) = 0;   // freezes every process
  virtual absl::Status Resume(const std::string& id) = 0;

  // Kills every process, removes every mount, cgroup, BPF link and file of the sandbox.
  // Running Execs return with reason kDestroyed.
  virtual absl::Status Destroy(const std::string& id) = 0;

  virtual std::vector<SandboxInfo> List() const = 0;
  // Per-phase timings of creates, destroys, starts and warm-pool resets since Open.
  virtual RuntimeTimings Timings() const = 0;
  virtual absl::StatusOr<SandboxInfo> Info(const std::string& id) const = 0;

  // Subscribes to events of one sandbox (`id`) or of all (`id` empty).
  virtual std::unique_ptr<Watch> WatchEvents(const std::string& id, EventCallback callback) = 0;

  // Removes what a crashed earlier run left: sandbox dirs under the state dir, cgroups named
  // with the prefix (killing their processes), stale mounts under the state dir.
  virtual absl::StatusOr<CleanupReport> CleanupLeftovers() = 0;
};

// Takes away what the node's runtimes share and keep between processes: the "<cgroup_prefix>"
// parent groups when empty, the pinned eBPF network programs under `options.bpf_pin_dir`,
// their anchor cgroup and the bpffs mount.
// Running runtimes keep working (they hold the objects); the next one pins a fresh copy.
absl::Status RemoveNodeSharedState(const RuntimeOptions& options);

// Builds a Debian image with debootstrap into <state_dir>/images/<name> (mirror from the
// machine's apt configuration). Progress lines go to `progress` (may be null).
absl::Status BuildImage(const std::string& state_dir, const std::string& name,
                        const std::string& suite, const std::function<void(std::string_view)>& progress);

// The URI of the first apt source of this machine that serves `suite` (the mirror BuildImage
// uses). NotFound when none does.
absl::StatusOr<std::string> DebianMirrorFor(const std::string& suite);

}  // namespace flotilla::sandbox
