// What the runtime makes ahead of the next Create (RuntimeOptions::prepare_ahead and
// start_ahead): the next sandbox's cgroups, and a whole sandbox for the options the last
// runtime-id Creates asked for. One preparer thread makes both, one thing at a time.
#include <sys/poll.h>

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

// Whether a sandbox made for `a` is the one `b` asks for: every option but the id and labels.
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

}  // namespace

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

std::shared_ptr<Sandbox> RuntimeImpl::TakeStartedAhead(const SandboxOptions& options) {
  if (!options_.prepare_ahead || !options_.start_ahead) return nullptr;
  std::shared_ptr<Sandbox> sb;
  {
    std::unique_lock<std::mutex> lock(spare_mu_);
    // One being started for these options is ready sooner than a new one would be: one Create
    // waits for it, any other starts its own.
    if (ahead_ == nullptr && ahead_making_ && !ahead_promised_ && SameSandbox(ahead_spec_, options)) {
      ahead_promised_ = true;
      spare_cv_.wait(lock, [&] { return !ahead_making_; });
      ahead_promised_ = false;
    }
    if (ahead_ == nullptr || !SameSandbox(ahead_spec_, options)) return nullptr;
    sb = std::move(ahead_);
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
      // Started ahead only for options asked for twice in a row, so that callers alternating
      // between kinds of sandboxes do not have one started and thrown away per Create.
      if (spec_repeats_ > 0 && SameSandbox(last_spec_, options)) {
        spec_repeats_ = 2;
      } else {
        last_spec_ = options;
        last_spec_.labels.clear();
        spec_repeats_ = 1;
      }
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
    if (options_.start_ahead && spec_repeats_ >= 2 && (ahead_ == nullptr || !SameSandbox(ahead_spec_, last_spec_))) {
      std::shared_ptr<Sandbox> stale = std::move(ahead_);
      ahead_spec_ = last_spec_;
      ahead_making_ = true;
      const SandboxOptions spec = ahead_spec_;
      lock.unlock();
      if (stale != nullptr) Teardown(*stale);
      absl::StatusOr<std::shared_ptr<Sandbox>> made = Build(spec, NewId("sbx"), nullptr);
      if (!made.ok()) FLOG(warn, "starting a sandbox ahead failed", {{"error", std::string(made.status().message())}});
      lock.lock();
      ahead_making_ = false;
      if (made.ok()) {
        ahead_ = std::move(*made);
      } else {
        spec_repeats_ = 0;  // not again until these options are asked for twice more
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

void RuntimeImpl::StopPreparer() {
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    spare_stop_ = true;
  }
  spare_cv_.notify_all();
  if (preparer_.joinable()) preparer_.join();
  std::shared_ptr<Sandbox> ahead;
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    ahead = std::move(ahead_);
  }
  if (ahead != nullptr) Teardown(*ahead);
}

}  // namespace flotilla::sandbox
