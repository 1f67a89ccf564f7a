// RuntimeImpl: the Runtime behind runtime.h. Private.
//
// Threads: the caller's threads run Create/Exec/Destroy... and send init plans to a zygote
// themselves (one at a time per zygote, under its slot's mutex; with a warm pool kZygotes of
// them, so that starts overlap); a spawner thread forks the zygotes at Open
// (each init's parent-death signal is tied to that thread, which lives as long as the runtime)
// and starts a new one when it dies; a monitor thread reaps inits (pidfds in epoll), enforces
// sandbox wall-clock limits and reports crashes; with prepare_ahead, a preparer thread makes
// the next sandbox's cgroups, and with start_ahead it starts the next sandbox (start_ahead.cc);
// with warm_pool_size, recycler threads reset the sandboxes Destroy returned (warm_pool.cc).
// Locks: mu_ guards the sandbox map; each Sandbox guards its own state; watch_mu_ guards
// subscribers (held while a callback runs, so unsubscribing waits for it); a zygote slot's mutex is taken
// before spawn_mu_, never after; spare_mu_ guards what is made ahead and pool_mu_ the warm
// pool, and neither is held while taking another.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "cgroups.h"
#include "enforcement.h"
#include "flotilla/sandbox/runtime.h"
#include "image_store.h"
#include "init_process.h"
#include "flotilla/common/unique_fd.h"
#include "zygote.h"

namespace flotilla::sandbox {

struct Sandbox {
  std::string id;
  SandboxOptions options;
  ResourceLimits limits;  // effective
  PolicyLimits policy;
  ExecutionClass execution_class = ExecutionClass::kBestEffort;
  std::string image_top;  // parent recorded by snapshots
  bool has_usr_layer = false;
  int64_t created_unix_ms = 0;
  int64_t deadline_ns = 0;  // whole-sandbox wall clock (monotonic), 0: none
  int64_t returned_ns = 0;  // when it was given back to the warm pool (SystemClock nanos)

  std::unique_ptr<SandboxCgroup> cgroup;
  std::unique_ptr<SandboxEnforcement> enforcement;
  UniqueFd control;  // runtime end of the init channel
  UniqueFd pidfd;
  pid_t pid = 0;     // host pid of init
  UniqueFd layer;    // the writable-layer tmpfs (mount fd); closed once init holds it
  int layer_fd_in_init = -1;  // init keeps the layer's mount fd open under this number

  // The sandbox root and writable layer, opened on demand through init's /proc entries (so
  // an idle sandbox holds few descriptors in the runtime). -1 with errno when init is gone.
  [[nodiscard]] int OpenRoot() const;
  [[nodiscard]] int OpenLayer() const;

  std::atomic<uint32_t> next_exec{1};
  std::atomic<bool> destroying{false};
  std::atomic<bool> paused{false};
  std::atomic<bool> broken{false};
  std::atomic<bool> timed_out{false};
  std::atomic<bool> registered{false};  // in the sandbox map: the monitor reaps init

  std::mutex mu;
  std::condition_variable cv;
  bool reaped = false;  // init reaped: `pid` may name another process now (guarded by mu)
  bool dead = false;    // init reaped and its end recorded (guarded by mu)
  StopReason death_reason = StopReason::kNone;
  std::string death_detail;
};

// Whether a sandbox made for `a` is the one `b` asks for: every option but the id and labels.
bool SameSandbox(const SandboxOptions& a, const SandboxOptions& b);

inline SandboxEvent MakeEvent(const std::string& id, SandboxEvent::Kind kind, StopReason reason = StopReason::kNone,
                              std::string detail = "") {
  SandboxEvent e;
  e.sandbox_id = id;
  e.kind = kind;
  e.reason = reason;
  e.detail = std::move(detail);
  return e;
}

class RuntimeImpl final : public Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);
  ~RuntimeImpl() override;

  const HostFeatures& features() const override { return features_; }
  absl::StatusOr<CreateResult> Create(const SandboxOptions& options) override;
  absl::StatusOr<ExecResult> Exec(const std::string& id, const ExecOptions& options,
                                  const OutputCallback& on_output) override;
  absl::Status PutFile(const std::string& id, const std::string& path, std::string_view content,
                       uint32_t mode) override;
  absl::StatusOr<FileContent> GetFile(const std::string& id, const std::string& path, uint64_t max_bytes) override;
  absl::StatusOr<SnapshotResult> Snapshot(const std::string& id, const std::string& name) override;
  absl::Status Pause(const std::string& id) override;
  absl::Status Resume(const std::string& id) override;
  absl::StatusOr<int> OpenNetworkNamespace(const std::string& id) override;
  absl::Status Destroy(const std::string& id) override;
  std::vector<SandboxInfo> List() const override;
  RuntimeTimings Timings() const override;
  absl::StatusOr<SandboxInfo> Info(const std::string& id) const override;
  std::unique_ptr<Watch> WatchEvents(const std::string& id, EventCallback callback) override;
  absl::StatusOr<CleanupReport> CleanupLeftovers() override;

  void Emit(SandboxEvent event);
  // Adds one run of a phase to Timings().
  void Time(PhaseTiming RuntimeTimings::*phase, double ms);
  void Unsubscribe(uint64_t token);

 private:
  RuntimeImpl() = default;
  absl::StatusOr<std::shared_ptr<Sandbox>> Find(const std::string& id) const;
  absl::StatusOr<std::shared_ptr<Sandbox>> FindRunning(const std::string& id) const;
  // Resolves `options` and starts sandbox `id` (with cgroups made ahead, or null); the failed
  // part is torn down on error. Not registered yet.
  absl::StatusOr<std::shared_ptr<Sandbox>> Build(const SandboxOptions& options, const std::string& id,
                                                 std::unique_ptr<SandboxCgroup> cgroup);
  // Starts sb's init. `attach`: attaches the enforcement's BPF programs to its cgroup (false
  // for a warm-pool reset, whose cgroup keeps them).
  absl::Status Start(Sandbox& sb, const ResolvedImage& image, bool attach = true);
  absl::Status WaitReady(Sandbox& sb);
  void Teardown(Sandbox& sb);
  // Kills every process of sb (init first) and waits until its init has exited.
  void KillAndWait(Sandbox& sb);

  // The warm pool (warm_pool.cc). Whether Destroy may return `sb` to the pool (it ended cleanly).
  bool Reusable(Sandbox& sb) const;
  // Kills sb's processes and queues it for the recycler; false (nothing done) when the pool is
  // off or full or sb did not end cleanly: the caller tears it down.
  bool ReturnToPool(const std::shared_ptr<Sandbox>& sb);
  // The next sandbox of `old`'s shell: a new init in old's cgroup under its enforcement, over a
  // fresh writable layer, not registered. Tears down what it cannot reuse.
  absl::StatusOr<std::shared_ptr<Sandbox>> Reset(std::shared_ptr<Sandbox> old);
  // A reset sandbox for `options`, reserved under the id it will have (options.id or its own)
  // in creating_; null when the pool holds none for these options.
  std::shared_ptr<Sandbox> TakeWarm(const SandboxOptions& options);
  // Asks the recyclers to start one more sandbox for `options`, within warm_pool_size (pool_mu_
  // held).
  void WantOneMore(const SandboxOptions& options);
  // `grows`: starts the sandboxes wanted_ asks for before resetting returned ones.
  void RecyclerLoop(bool grows);
  // Stops the recycler; returns every pooled sandbox (queued or reset) for the caller to tear down.
  std::vector<std::shared_ptr<Sandbox>> StopRecycler();
  // Has the zygote clone an init that runs `plan` (on the calling thread; a zygote that died
  // is replaced by the spawner thread, and this call fails).
  // `slot`: the zygote that cloned it, for PrepareNext.
  absl::StatusOr<Zygote::Spawned> Spawn(const InitPlan& plan, size_t* slot);
  // Has zygote `slot` make its next init's network namespace now (RuntimeOptions::prepare_ahead).
  void PrepareNext(size_t slot);
  // The cgroup directory name of sandbox `id`.
  std::string CgroupName(const std::string& id) const;
  // Makes a sandbox's cgroups (no limits yet) for a runtime-chosen id, kept for the next
  // Create that lets the runtime choose; TakeSpareCgroup hands them out (null: none).
  void MakeSpareCgroup();
  std::unique_ptr<SandboxCgroup> TakeSpareCgroup(std::string* id);
  // The sandbox started ahead for `options`, reserved under its id in creating_; null when
  // there is none for these options (or it died, or its image changed since).
  std::shared_ptr<Sandbox> TakeStartedAhead(const SandboxOptions& options);
  // After a Create: has the preparer make the next sandbox's parts (and, for the options of
  // runtime-id Creates, start the next sandbox).
  void WantAhead(const SandboxOptions& options);
  // The options to keep a sandbox started for, most recently asked for first (under spare_mu_).
  std::vector<SandboxOptions> WantedAheadLocked() const;
  // Stops the preparer; returns the sandboxes it had started ahead, for the caller to tear down.
  std::vector<std::shared_ptr<Sandbox>> StopPreparer();
  void PreparerLoop();
  void SpawnerLoop();
  void MonitorLoop();
  void WatchInit(const std::shared_ptr<Sandbox>& sb);
  void OnInitExit(const std::shared_ptr<Sandbox>& sb);
  SandboxInfo InfoOf(const Sandbox& sb) const;

  RuntimeOptions options_;
  HostFeatures features_;
  std::unique_ptr<CgroupDriver> cgroups_;
  std::string instance_;      // "i<pid>-<hex>"
  std::string layer_dir_, root_dir_;  // <state>/mnt/{layer,root}: every sandbox's mount points
  // A sandbox's cgroups are "<prefix>/<instance>.<sandbox id>" in each hierarchy.
  UniqueFd userns_;
  std::unique_ptr<ImageStore> images_;
  std::unique_ptr<PolicyEnforcement> enforcement_;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::map<std::string, bool> creating_;

  // The zygotes and their spawner thread. A slot's zygote is used under the slot's mutex; the
  // spawner thread replaces it (a restart) only while the holder of that mutex waits for that,
  // and at the end, when no Create runs any more.
  // A runtime with a warm pool starts kZygotes (its recyclers' starts overlap), any other one.
  static constexpr size_t kZygotes = 4;
  struct ZygoteSlot {
    std::mutex mu;
    std::unique_ptr<Zygote> zygote;
  };
  ZygoteSlot zygotes_[kZygotes];
  size_t zygote_count_ = 1;  // set at Open
  std::atomic<size_t> next_zygote_{0};
  std::mutex spawn_mu_;
  std::condition_variable spawn_cv_;
  bool zygote_closing_ = false;                                    // guarded by spawn_mu_
  bool stopping_ = false;  // the monitor's end (guarded by spawn_mu_)
  bool restart_zygote_ = false;                                    // guarded by spawn_mu_
  size_t restart_slot_ = 0;                                        // guarded by spawn_mu_
  absl::Status zygote_started_ = absl::UnknownError("starting");  // guarded by spawn_mu_
  bool zygote_known_ = false;                                      // guarded by spawn_mu_
  std::thread spawner_;

  // The next sandbox's cgroups, made ahead: the first during Open, the next ones (with
  // RuntimeOptions::prepare_ahead) by the preparer thread once each sandbox has started.
  std::mutex spare_mu_;
  std::condition_variable spare_cv_;
  std::string spare_id_;                         // guarded by spare_mu_
  std::unique_ptr<SandboxCgroup> spare_cgroup_;  // guarded by spare_mu_
  bool spare_wanted_ = false;                    // guarded by spare_mu_
  bool spare_making_ = false;                    // guarded by spare_mu_
  bool spare_stop_ = false;                      // guarded by spare_mu_
  // Sandboxes started ahead (RuntimeOptions::start_ahead), one per kind of options, and the
  // options of the last runtime-id Creates (newest last, labels cleared). All guarded by
  // spare_mu_.
  struct StartedAhead {
    SandboxOptions options;
    std::shared_ptr<Sandbox> sandbox;
  };
  std::vector<StartedAhead> ahead_;
  std::vector<SandboxOptions> recent_;
  SandboxOptions ahead_making_for_;  // what the preparer is starting now, when ahead_making_
  bool ahead_making_ = false;
  bool ahead_promised_ = false;  // a Create waits for the one being started
  std::thread preparer_;

  // The warm pool (RuntimeOptions::warm_pool_size). All guarded by pool_mu_.
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::shared_ptr<Sandbox>> returned_;  // destroyed cleanly, waiting for their reset
  std::vector<std::shared_ptr<Sandbox>> warm_;      // reset and ready, oldest first
  std::vector<std::shared_ptr<Sandbox>> evicted_;   // reset, pushed out by a full pool: torn down
  std::vector<SandboxOptions> resetting_for_;       // the options of those being reset now
  size_t promised_ = 0;                             // Creates waiting for a reset to end
  std::vector<SandboxOptions> wanted_;              // one more to start for each (the pool ran dry)
  size_t growing_ = 0;                              // of those, being started now
  std::atomic<size_t> in_use_{0};                   // sandboxes_.size(), read without mu_
  std::atomic<size_t> creates_in_flight_{0};        // Create calls not yet returned
  bool pool_stop_ = false;
  std::vector<std::thread> recyclers_;               // started at Open, more when resets queue
  size_t idle_recyclers_ = 0;                       // recyclers waiting for work

  // Monitor.
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: new deadlines or shutdown
  std::mutex monitor_mu_;
  std::map<int, std::weak_ptr<Sandbox>> watched_;  // pidfd -> sandbox
  std::thread monitor_;

  mutable std::mutex timings_mu_;
  RuntimeTimings timings_;  // guarded by timings_mu_

  std::mutex watch_mu_;
  std::map<uint64_t, std::pair<std::string, EventCallback>> subscribers_;
  uint64_t next_token_ = 1;
};

}  // namespace flotilla::sandbox
