// What the runtime makes ahead of the next Create (RuntimeOptions::prepare_ahead and
// start_ahead): the next sandbox's cgroups, and whole sandboxes for the options that recent
// runtime-id Creates asked for repeatedly. One preparer thread makes them, one at a time.
#include <sys/poll.h>

#include <algorithm>
#include <optional>

#include "flotilla/common/ids.h"
#include "flotilla/common/logging.h"
#include "runtime_impl.h"

namespace flotilla::sandbox {
namespace {

bool SameLimits(const ResourceLimits& a, const ResourceLimits& b) {
  return a.memory_bytes == b.memory_bytes && a.pids == b.pids && a.cpu_weight == b.cpu_weight &&
         a.cpu_quota_millicores == b.cpu_quota_millicores && a.disk_bytes == b.disk_bytes &&
         a.timeout_ms == b.timeout_ms && a.cpus == b.cpus && a.mems == b.mems;
}

}  // namespace

bool SameSandbox(const SandboxOptions& a, const SandboxOptions& b) {
  if (a.image != b.image || a.policy_yaml != b.policy_yaml || a.policy_name != b.policy_name ||
      !SameLimits(a.resources, b.resources) || a.execution_class != b.execution_class ||
      a.extra_allow.size() != b.extra_allow.size()) {
    return false;
  }
  for (size_t i = 0; i < a.extra_allow.size(); ++i) {
    if (a.extra_allow[i].cidr != b.extra_allow[i].cidr || a.extra_allow[i].port != b.extra_allow[i].port) return false;
  }
  return true;
}

void RuntimeImpl::MakeSpareCgroup() {
  std::string id = NewId("sbx");
  auto made = cgroups_->Make(options_.cgroup_prefix, CgroupName(id));
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (made.ok() && spare_cgroup_ == nullptr) {
    spare_id_ = std::move(id);
    spare_cgroup_ = std::move(*made);
  }
}

std::unique_ptr<SandboxCgroup> RuntimeImpl::TakeSpareCgroup(std::string* id) {
  std::unique_lock<std::mutex> lock(spare_mu_);
  // One on its way is ready sooner than a new one would be.
  spare_cv_.wait(lock, [&] { return !spare_making_ || spare_cgroup_ != nullptr; });
  if (spare_cgroup_ == nullptr) return nullptr;
  *id = std::move(spare_id_);
  return std::move(spare_cgroup_);
}

std::vector<SandboxOptions> RuntimeImpl::WantedAheadLocked() const {
  std::vector<SandboxOptions> wanted;
  const size_t kinds = static_cast<size_t>(std::max(0, options_.start_ahead_kinds));
  for (size_t i = recent_.size(); i-- > 0 && wanted.size() < kinds;) {
    const SandboxOptions& o = recent_[i];
    if (std::any_of(wanted.begin(), wanted.end(), [&](const SandboxOptions& w) { return SameSandbox(w, o); })) {
      continue;
    }
    if (std::count_if(recent_.begin(), recent_.end(), [&](const SandboxOptions& r) { return SameSandbox(r, o); }) >= 2) {
      wanted.push_back(o);
    }
  }
  return wanted;
}

std::shared_ptr<Sandbox> RuntimeImpl::TakeStartedAhead(const SandboxOptions& options) {
  if (!options_.prepare_ahead || !options_.start_ahead) return nullptr;
  std::shared_ptr<Sandbox> sb;
  {
    std::unique_lock<std::mutex> lock(spare_mu_);
    auto find = [&] {
      return std::find_if(ahead_.begin(), ahead_.end(), [&](const StartedAhead& a) { return SameSandbox(a.options, options); });
    };
    // One being started for these options is ready sooner than a new one would be: one Create
    // waits for it, any other starts its own.
    if (find() == ahead_.end() && ahead_making_ && !ahead_promised_ && SameSandbox(ahead_making_for_, options)) {
      ahead_promised_ = true;
      // Until it is there, or the preparer has gone on to other options (the build failed).
      spare_cv_.wait(lock, [&] {
        return find() != ahead_.end() || !ahead_making_ || !SameSandbox(ahead_making_for_, options);
      });
      ahead_promised_ = false;
    }
    auto it = find();
    if (it == ahead_.end()) return nullptr;
    sb = std::move(it->sandbox);
    ahead_.erase(it);
  }
  // Handed out only alive, over the layers its image names now, and under an id still free.
  struct pollfd exited {sb->pidfd.get(), POLLIN, 0};
  absl::StatusOr<ResolvedImage> image = images_->Resolve(options.image);
  bool usable = ::poll(&exited, 1, 0) == 0 && image.ok() && image->top == sb->image_top;
  if (usable) {
    std::lock_guard<std::mutex> lock(mu_);
    usable = !sandboxes_.count(sb->id) && !creating_.count(sb->id);
    if (usable) creating_[sb->id] = true;
  }
  if (!usable) {
    Teardown(*sb);
    return nullptr;
  }
  return sb;
}

void RuntimeImpl::WantAhead(const SandboxOptions& options) {
  if (!options_.prepare_ahead) return;
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    if (options.id.empty() && options_.start_ahead) {
      // Only options asked for at least twice among the last eight are started ahead, so that a
      // caller whose every sandbox differs does not have one started and thrown away per Create.
      constexpr size_t kRecent = 8;
      if (recent_.size() == kRecent) recent_.erase(recent_.begin());
      recent_.push_back(options);
      recent_.back().labels.clear();
    }
    spare_wanted_ = true;
  }
  spare_cv_.notify_all();
}

void RuntimeImpl::PreparerLoop() {
  std::unique_lock<std::mutex> lock(spare_mu_);
  for (;;) {
    spare_cv_.wait(lock, [&] { return spare_stop_ || spare_wanted_; });
    if (spare_stop_) return;
    spare_wanted_ = false;
    // One sandbox started ahead per kind of options still asked for: the others go, and the
    // missing ones are started one at a time, most recently asked for first.
    while (options_.start_ahead && !spare_stop_) {
      const std::vector<SandboxOptions> wanted = WantedAheadLocked();
      auto is_wanted = [&](const SandboxOptions& o) {
        return std::any_of(wanted.begin(), wanted.end(), [&](const SandboxOptions& w) { return SameSandbox(w, o); });
      };
      std::vector<std::shared_ptr<Sandbox>> stale;
      for (auto it = ahead_.begin(); it != ahead_.end();) {
        if (is_wanted(it->options)) {
          ++it;
        } else {
          stale.push_back(std::move(it->sandbox));
          it = ahead_.erase(it);
        }
      }
      std::optional<SandboxOptions> next;
      for (const SandboxOptions& w : wanted) {
        if (std::none_of(ahead_.begin(), ahead_.end(), [&](const StartedAhead& a) { return SameSandbox(a.options, w); })) {
          next = w;
          break;
        }
      }
      if (!next && stale.empty()) break;
      if (next) {
        ahead_making_for_ = *next;
        ahead_making_ = true;
      }
      lock.unlock();
      for (const auto& sb : stale) Teardown(*sb);
      absl::StatusOr<std::shared_ptr<Sandbox>> made = absl::CancelledError("nothing to start");
      if (next) {
        made = Build(*next, NewId("sbx"), nullptr);
        if (!made.ok()) FLOG(warn, "starting a sandbox ahead failed", {{"error", std::string(made.status().message())}});
      }
      lock.lock();
      if (!next) continue;
      ahead_making_ = false;
      if (made.ok()) {
        ahead_.push_back(StartedAhead{*next, std::move(*made)});
      } else {
        // Not again until these options are asked for twice more.
        std::erase_if(recent_, [&](const SandboxOptions& r) { return SameSandbox(r, *next); });
      }
      spare_cv_.notify_all();
    }
    if (spare_cgroup_ == nullptr && !spare_stop_) {
      spare_making_ = true;
      lock.unlock();
      MakeSpareCgroup();
      lock.lock();
      spare_making_ = false;
      spare_cv_.notify_all();
    }
  }
}

std::vector<std::shared_ptr<Sandbox>> RuntimeImpl::StopPreparer() {
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    spare_stop_ = true;
  }
  spare_cv_.notify_all();
  if (preparer_.joinable()) preparer_.join();
  std::vector<std::shared_ptr<Sandbox>> ahead;
  std::lock_guard<std::mutex> lock(spare_mu_);
  for (StartedAhead& a : ahead_) ahead.push_back(std::move(a.sandbox));
  ahead_.clear();
  return ahead;
}

}  // namespace flotilla::sandbox
