// The warm pool (RuntimeOptions::warm_pool_size): a sandbox that ended cleanly is reset instead
// of torn down, and handed to the next Create with the same options. The reset keeps the
// sandbox's shell (its cgroup with the limits set, the network programs attached to it, the
// compiled policy) and replaces everything a sample could have touched: every process (init
// included) is killed, which takes its pid, mount, network, IPC and UTS namespaces and its
// writable layer with it, and a new init starts in the same cgroup over a fresh writable layer,
// applying the policy to itself again. Four recycler threads reset, their waits overlapping;
// one of them first grows the pool when it ran dry. More recyclers start when returned
// sandboxes queue up (kMaxRecyclers).
//
// Sizing: the pool grows by one for every Create that found none ready and for every Create
// that took the last ready one while others of its options were still being reset (the next
// such Create would wait). So it grows ahead of the samples until it holds the sandboxes in
// use plus those a reset's latency keeps in the recyclers at the rate they come back, and
// stops growing once no Create drains it; warm_pool_size bounds it, and so does the demand
// (sandboxes in use and Creates under way, plus kMaxGrowing).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "runtime_impl.h"
#include "sys_util.h"

namespace flotilla::sandbox {
namespace {

// Sandboxes started at once to grow the pool (each is a whole start: cgroups, enforcers);
// more wait in wanted_ for their turn.
constexpr size_t kMaxGrowing = 4;
// Recyclers: four to begin with; one more whenever more sandboxes wait for their reset than
// recyclers are free, up to this many. Most of a reset is waiting (the old init's exit, the
// zygote's clone, the new init's set-up in its own process), so resets under way at once are
// what keeps the pool ahead of the samples: a fixed four fell behind at 12-40 samples/s.
constexpr size_t kMaxRecyclers = 32;

// Sets the hostname of the UTS namespace of process `pid` (host root: the namespace is owned
// by the host's user namespace). On a thread of its own, which ends in that namespace.
absl::Status SetHostnameOf(pid_t pid, const std::string& name) {
  UniqueFd uts(::open(absl::StrCat("/proc/", pid, "/ns/uts").c_str(), O_RDONLY | O_CLOEXEC));
  if (!uts.valid()) return ErrnoStatus("open the sandbox's uts namespace");
  absl::Status result;
  std::thread setter([&] {
    if (::setns(uts.get(), CLONE_NEWUTS) != 0) {
      result = ErrnoStatus("setns uts");
    } else if (::sethostname(name.data(), name.size()) != 0) {
      result = ErrnoStatus("sethostname");
    }
  });
  setter.join();
  return result;
}

}  // namespace

bool RuntimeImpl::Reusable(Sandbox& sb) const {
  if (sb.paused.load() || sb.broken.load() || sb.timed_out.load() || !sb.cgroup || !sb.enforcement) return false;
  {
    std::lock_guard<std::mutex> lock(sb.mu);
    if (sb.dead || sb.reaped) return false;
  }
  const CgroupCounters c = sb.cgroup->Counters();
  return c.oom_kills == 0 && c.pids_max_hits == 0 && sb.enforcement->Violations() == 0;
}

bool RuntimeImpl::ReturnToPool(const std::shared_ptr<Sandbox>& sb) {
  if (options_.warm_pool_size == 0 || !Reusable(*sb)) return false;
  if (sb->execution_class == ExecutionClass::kBestEffort) {
    // Its init dies at normal priority, not SCHED_IDLE: the exit takes its namespaces and
    // mount tree down in its own context, which on a loaded host would otherwise wait behind
    // every runnable task (0.46 s per reset at load 20-50 in the rollout benchmark), and the
    // reset waits for that exit. Only while init is unreaped, so that its pid names it.
    std::lock_guard<std::mutex> lock(sb->mu);
    struct sched_param normal {};
    if (!sb->reaped) (void)::sched_setscheduler(sb->pid, SCHED_OTHER, &normal);
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_stop_) return false;
    if (returned_.size() + resetting_for_.size() + warm_.size() >= options_.warm_pool_size) {
      // Full: the longest idle reset sandbox makes room (its options may not be asked for any
      // more), torn down by the recycler; with none idle, this one is torn down by the caller.
      if (warm_.empty()) return false;
      evicted_.push_back(std::move(warm_.front()));
      warm_.erase(warm_.begin());
    }
    // Every process is signalled before Destroy returns; the recycler waits for their end.
    ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
    sb->cgroup->KillAll();
    sb->returned_ns = SystemClock::Get().NowNanos();
    returned_.push_back(sb);
    if (returned_.size() > idle_recyclers_ && recyclers_.size() < kMaxRecyclers) {
      recyclers_.emplace_back([this] { RecyclerLoop(false); });
    }
  }
  pool_cv_.notify_all();
  return true;
}

absl::StatusOr<std::shared_ptr<Sandbox>> RuntimeImpl::Reset(std::shared_ptr<Sandbox> old) {
  Stopwatch phase;
  KillAndWait(*old);
  bool dead = false;
  {
    // The monitor reaps a registered init; its exit record comes with the reap.
    std::unique_lock<std::mutex> lock(old->mu);
    dead = old->cv.wait_for(lock, std::chrono::seconds(10), [&] { return old->dead; });
  }
  // An Exec that was running when Destroy came still holds the sandbox (and reads its cgroup
  // and enforcer counters as it ends): the shell moves on only once nobody else does.
  for (int i = 0; i < 2000 && old.use_count() > 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!dead || old.use_count() > 1 || !old->cgroup->Empty()) {
    Teardown(*old);
    return absl::FailedPreconditionError(absl::StrCat("sandbox '", old->id, "' could not be reset: ",
                                                      !dead ? "its init was not reaped" : old.use_count() > 1
                                                                                              ? "still in use"
                                                                                              : "processes left"));
  }
  Time(&RuntimeTimings::reset_exit, phase.ElapsedMillis());
  phase.Reset();
  auto fresh = std::make_shared<Sandbox>();
  fresh->id = NewId("sbx");
  fresh->options = old->options;
  fresh->options.id.clear();
  fresh->limits = old->limits;
  fresh->policy = old->policy;
  fresh->execution_class = old->execution_class;
  fresh->cgroup = std::move(old->cgroup);
  fresh->enforcement = std::move(old->enforcement);
  old->control.Reset();
  old->pidfd.Reset();
  old->layer.Reset();
  absl::Status s = [&]() -> absl::Status {
    RETURN_IF_ERROR(fresh->enforcement->Rearm(fresh->id));
    ASSIGN_OR_RETURN(ResolvedImage image, images_->Resolve(fresh->options.image));
    fresh->image_top = image.top;
    fresh->has_usr_layer = !image.usr_lowers.empty();
    return Start(*fresh, image, /*attach=*/false);
  }();
  if (!s.ok()) {
    Teardown(*fresh);
    return s;
  }
  Time(&RuntimeTimings::reset_start, phase.ElapsedMillis());
  return fresh;
}

std::shared_ptr<Sandbox> RuntimeImpl::TakeWarm(const SandboxOptions& options) {
  if (options_.warm_pool_size == 0 || (!options.id.empty() && !IsSafeId(options.id))) return nullptr;
  std::shared_ptr<Sandbox> sb;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    auto same = [&](const std::shared_ptr<Sandbox>& w) { return SameSandbox(w->options, options); };
    auto it = std::find_if(warm_.begin(), warm_.end(), same);
    // None was ready: the pool grows by one for these options (within its size), so that it
    // comes to hold more than the Creates that overlap with the resets need, and a Create
    // then finds one ready instead of waiting for a reset.
    if (it == warm_.end()) WantOneMore(options);
    // One given back for these options is ready sooner than a new one would be started: a
    // reset is a start without making the cgroups and attaching the enforcers, which on a
    // loaded host cost several resets' time, and four run at once. As many Creates wait as
    // there are such sandboxes queued or being reset; any other starts its own.
    if (it == warm_.end()) {
      const size_t coming = static_cast<size_t>(std::count_if(returned_.begin(), returned_.end(), same)) +
                            static_cast<size_t>(std::count_if(resetting_for_.begin(), resetting_for_.end(),
                                                              [&](const SandboxOptions& r) { return SameSandbox(r, options); }));
      if (coming > promised_) {
        ++promised_;
        Stopwatch waited;
        pool_cv_.wait_for(lock, std::chrono::seconds(10), [&] {
          return pool_stop_ || std::any_of(warm_.begin(), warm_.end(), same) ||
                 (std::none_of(returned_.begin(), returned_.end(), same) &&
                  std::none_of(resetting_for_.begin(), resetting_for_.end(),
                               [&](const SandboxOptions& r) { return SameSandbox(r, options); }));
        });
        --promised_;
        lock.unlock();
        Time(&RuntimeTimings::create_waited, waited.ElapsedMillis());
        lock.lock();
        it = std::find_if(warm_.begin(), warm_.end(), same);
      }
    }
    if (it == warm_.end()) return nullptr;
    sb = std::move(*it);
    warm_.erase(it);
    // The last ready one while others are still being reset: the next Create for these
    // options would wait, so one more is started now, ahead of it.
    if (std::none_of(warm_.begin(), warm_.end(), same) &&
        (std::any_of(returned_.begin(), returned_.end(), same) ||
         std::any_of(resetting_for_.begin(), resetting_for_.end(),
                     [&](const SandboxOptions& r) { return SameSandbox(r, options); }))) {
      WantOneMore(options);
    }
  }
  const std::string id = options.id.empty() ? sb->id : options.id;
  // Handed out only alive, over the layers its image names now, and under an id still free.
  struct pollfd exited {sb->pidfd.get(), POLLIN, 0};
  absl::StatusOr<ResolvedImage> image = images_->Resolve(options.image);
  bool usable = ::poll(&exited, 1, 0) == 0 && image.ok() && image->top == sb->image_top;
  bool taken = false;
  if (usable) {
    std::lock_guard<std::mutex> lock(mu_);
    taken = sandboxes_.count(id) != 0 || creating_.count(id) != 0;
    if (!taken) creating_[id] = true;
  }
  if (taken) {
    // The Create fails on the id (AlreadyExists); the sandbox stays pooled.
    std::lock_guard<std::mutex> lock(pool_mu_);
    warm_.push_back(std::move(sb));
    return nullptr;
  }
  if (usable && id != sb->id) {
    absl::Status named = SetHostnameOf(sb->pid, id.substr(0, 63));
    if (!named.ok()) {
      FLOG(warn, "a pooled sandbox could not be renamed", {{"error", std::string(named.message())}});
      std::lock_guard<std::mutex> lock(mu_);
      creating_.erase(id);
      usable = false;
    }
  }
  if (!usable) {
    Teardown(*sb);
    return nullptr;
  }
  sb->id = id;
  return sb;
}

void RuntimeImpl::WantOneMore(const SandboxOptions& options) {
  // Those being started are in resetting_for_ already. Within warm_pool_size, the pool holds
  // at most kMaxGrowing more than the demand (sandboxes in use and Creates under way): that
  // covers resets as slow as a sample's whole life, and a pool the resets cannot keep up with
  // (a host short of CPU) does not grow on and on, each start taking CPU the resets need.
  const size_t pooled = returned_.size() + resetting_for_.size() + warm_.size() + wanted_.size();
  const size_t demand = in_use_.load() + creates_in_flight_.load();
  if (pooled >= options_.warm_pool_size || pooled >= demand + kMaxGrowing) return;
  wanted_.push_back(options);
  wanted_.back().id.clear();
  wanted_.back().labels.clear();
  pool_cv_.notify_all();
}

void RuntimeImpl::RecyclerLoop(bool grows) {
  std::unique_lock<std::mutex> lock(pool_mu_);
  for (;;) {
    ++idle_recyclers_;
    pool_cv_.wait(lock, [&] {
      return pool_stop_ || !returned_.empty() || !evicted_.empty() || (!wanted_.empty() && growing_ < kMaxGrowing);
    });
    --idle_recyclers_;
    if (pool_stop_) return;
    if (!evicted_.empty()) {
      std::vector<std::shared_ptr<Sandbox>> evicted = std::move(evicted_);
      evicted_.clear();
      lock.unlock();
      for (const auto& sb : evicted) Teardown(*sb);
      lock.lock();
      continue;
    }
    // A sandbox given back is reset first, except by the recycler that grows the pool: it
    // starts one more for options a Create found none ready for first (were growth behind the
    // returns, a pool that Creates keep waiting on would never grow).
    std::shared_ptr<Sandbox> old;
    SandboxOptions options;
    const bool may_grow = !wanted_.empty() && growing_ < kMaxGrowing;
    if (!returned_.empty() && (!grows || !may_grow)) {
      old = std::move(returned_.front());
      returned_.erase(returned_.begin());
      options = old->options;
      Time(&RuntimeTimings::reset_queued, static_cast<double>(SystemClock::Get().NowNanos() - old->returned_ns) / 1e6);
    } else {
      options = std::move(wanted_.front());
      wanted_.erase(wanted_.begin());
      ++growing_;
    }
    resetting_for_.push_back(options);
    lock.unlock();
    Stopwatch grow;
    const bool growing = old == nullptr;
    absl::StatusOr<std::shared_ptr<Sandbox>> fresh =
        old != nullptr ? Reset(std::move(old)) : Build(options, NewId("sbx"), nullptr);
    if (growing && fresh.ok()) Time(&RuntimeTimings::pool_grow, grow.ElapsedMillis());
    if (!fresh.ok()) FLOG(warn, "warm pool: reset failed", {{"error", std::string(fresh.status().message())}});
    lock.lock();
    if (growing) --growing_;
    resetting_for_.erase(std::find_if(resetting_for_.begin(), resetting_for_.end(),
                                      [&](const SandboxOptions& r) { return SameSandbox(r, options); }));
    if (fresh.ok()) {
      // Closing: the runtime tears it down with the rest.
      (pool_stop_ ? returned_ : warm_).push_back(std::move(*fresh));
    }
    pool_cv_.notify_all();
  }
}

std::vector<std::shared_ptr<Sandbox>> RuntimeImpl::StopRecycler() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_stop_ = true;
  }
  pool_cv_.notify_all();
  std::vector<std::thread> recyclers;
  {
    // None is added once pool_stop_ is set.
    std::lock_guard<std::mutex> lock(pool_mu_);
    recyclers = std::move(recyclers_);
    recyclers_.clear();
  }
  for (std::thread& t : recyclers) t.join();
  std::lock_guard<std::mutex> lock(pool_mu_);
  std::vector<std::shared_ptr<Sandbox>> pooled = std::move(returned_);
  for (auto* list : {&warm_, &evicted_}) {
    for (std::shared_ptr<Sandbox>& sb : *list) pooled.push_back(std::move(sb));
    list->clear();
  }
  returned_.clear();
  return pooled;
}

}  // namespace flotilla::sandbox
