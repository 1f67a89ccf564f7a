// Encoding an init plan in the runtime; init_plan_view.cc reads it in the zygote and the init.
#include "init_plan.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace flotilla::sandbox {
namespace {

// Appends to the buffer being encoded; offsets are from its start.
class Builder {
 public:
  uint32_t String(const std::string& s) {
    uint32_t at = Size();
    out_.append(s.c_str(), s.size() + 1);
    return at;
  }
  uint32_t Aligned(const std::string& s) {
    out_.append((8 - out_.size() % 8) % 8, '\0');
    uint32_t at = Size();
    out_.append(s);
    return at;
  }
  template <typename T>
  uint32_t Array(const std::vector<T>& items) {
    out_.append((8 - out_.size() % 8) % 8, '\0');
    uint32_t at = Size();
    out_.append(reinterpret_cast<const char*>(items.data()), items.size() * sizeof(T));
    return at;
  }
  template <typename T>
  void Patch(uint32_t at, const std::vector<T>& items) {
    std::memcpy(out_.data() + at, items.data(), items.size() * sizeof(T));
  }
  uint32_t Size() const { return static_cast<uint32_t>(out_.size()); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string EncodeSeccompHook(const sock_filter* insns, size_t count, bool uses_notify) {
  SeccompHookHeader h{uses_notify ? 1u : 0u, static_cast<uint32_t>(count)};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(insns), count * sizeof(sock_filter));
  return out;
}

absl::StatusOr<EncodedInitPlan> EncodeInitPlan(const InitPlan& plan) {
  EncodedInitPlan enc;
  enc.fds = {plan.control_fd, plan.tmpfs_fd};
  enc.fds.insert(enc.fds.end(), plan.layer_fds.begin(), plan.layer_fds.end());
  Builder b;
  b.out().assign(sizeof(InitPlanWireHeader), '\0');
  InitPlanWireHeader h{};
  h.magic = kInitPlanMagic;
  h.n_steps = static_cast<uint32_t>(plan.steps.size());
  std::vector<InitPlanWireStep> steps(plan.steps.size());
  h.steps = b.Array(steps);  // filled in below, once the strings have offsets
  std::vector<InitPlanWireHook> hooks;
  for (uint32_t stage = 0; stage < 2; ++stage) {
    for (const ChildHook& hook : stage == 0 ? plan.before_userns : plan.last) {
      InitPlanWireHook w{};
      w.kind = static_cast<uint32_t>(hook.kind);
      w.len = static_cast<uint32_t>(hook.data.size());
      w.fd_index = -1;
      if (hook.fd >= 0) {
        w.fd_index = static_cast<int32_t>(enc.fds.size());
        enc.fds.push_back(hook.fd);
      }
      w.stage = stage;
      hooks.push_back(w);
    }
  }
  h.n_hooks = static_cast<uint32_t>(hooks.size());
  h.hooks = b.Array(hooks);
  for (size_t i = 0; i < hooks.size(); ++i) {
    const ChildHook& hook = i < plan.before_userns.size() ? plan.before_userns[i]
                                                          : plan.last[i - plan.before_userns.size()];
    hooks[i].data = b.Aligned(hook.data);
  }
  b.Patch(h.hooks, hooks);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const InitStep& s = plan.steps[i];
    InitPlanWireStep& w = steps[i];
    w.kind = static_cast<uint32_t>(s.kind);
    w.source = b.String(s.source);
    w.target = b.String(s.target);
    w.fstype = b.String(s.fstype);
    w.data = b.String(s.data);
    w.mode = s.mode;
    w.optional = s.optional ? 1 : 0;
    w.flags = s.flags;
    w.dev = s.dev;
  }
  b.Patch(h.steps, steps);
  h.rw_dir = b.String(plan.rw_dir);
  h.root_dir = b.String(plan.root_dir);
  h.hostname = b.String(plan.hostname);
  h.n_procs = static_cast<uint32_t>(plan.cgroup_procs.size());
  h.procs = b.Size();
  for (const std::string& p : plan.cgroup_procs) b.String(p);
  b.out().push_back('\0');
  h.flags = (plan.sched_idle ? 1u : 0u) | (plan.core_sched ? 2u : 0u);
  h.keep_caps = plan.keep_caps;
  h.n_fds = static_cast<uint32_t>(enc.fds.size());
  h.n_layer_fds = static_cast<uint32_t>(plan.layer_fds.size());
  h.total = b.Size();
  std::memcpy(b.out().data(), &h, sizeof(h));
  if (b.out().size() > kInitPlanMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("sandbox init plan: ", b.out().size(), " bytes, more than ",
                                                   kInitPlanMaxBytes));
  }
  if (enc.fds.size() > static_cast<size_t>(kInitPlanMaxFds)) {
    return absl::InvalidArgumentError(absl::StrCat("sandbox init plan: ", enc.fds.size(), " descriptors"));
  }
  for (int fd : enc.fds) {
    if (fd < 0) return absl::InvalidArgumentError("sandbox init plan: a descriptor is missing");
  }
  enc.bytes = std::move(b.out());
  return enc;
}

}  // namespace flotilla::sandbox
