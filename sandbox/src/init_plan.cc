#include "init_plan.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/policies/apparmor.h"
#include "flotilla/policies/landlock.h"
#include "flotilla/policies/seccomp.h"

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

struct SeccompHookHeader {
  uint32_t uses_notify;
  uint32_t count;
};

}  // namespace

std::string EncodeSeccompHook(const sock_filter* insns, size_t count, bool uses_notify) {
  SeccompHookHeader h{uses_notify ? 1u : 0u, static_cast<uint32_t>(count)};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(insns), count * sizeof(sock_filter));
  return out;
}

int RunChildHook(uint32_t kind, const char* data, size_t len, int fd) noexcept {
  switch (static_cast<ChildHookKind>(kind)) {
    case ChildHookKind::kLandlock:
      return policies::LandlockPlan::ApplyEncodedInChild(data, len);
    case ChildHookKind::kSeccomp: {
      SeccompHookHeader h;
      if (len < sizeof(h)) return EINVAL;
      std::memcpy(&h, data, sizeof(h));
      if (len != sizeof(h) + size_t{h.count} * sizeof(sock_filter)) return EINVAL;
      return policies::InstallSeccompFilterInChild(reinterpret_cast<const sock_filter*>(data + sizeof(h)), h.count,
                                                   h.uses_notify != 0, fd);
    }
    case ChildHookKind::kAppArmor: {
      char name[200];
      if (len == 0 || len >= sizeof(name)) return EINVAL;
      std::memcpy(name, data, len);
      name[len] = '\0';
      return policies::ChangeAppArmorProfileNow(name);
    }
  }
  return EINVAL;
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

bool InitPlanView::Decode(const char* data, size_t len, const int* fds, int nfds, int userns_fd) {
  if (len < sizeof(InitPlanWireHeader) + 1 || data[len - 1] != '\0') return false;
  std::memcpy(&h_, data, sizeof(h_));
  if (h_.magic != kInitPlanMagic || h_.total != len) return false;
  if (h_.n_fds != static_cast<uint32_t>(nfds) || nfds < 2 || nfds > kInitPlanMaxFds) return false;
  if (h_.n_layer_fds > static_cast<uint32_t>(nfds - 2)) return false;
  auto in = [&](uint64_t off, uint64_t size) { return off <= len && size <= len - off; };
  if (!in(h_.steps, uint64_t{h_.n_steps} * sizeof(InitPlanWireStep)) ||
      !in(h_.hooks, uint64_t{h_.n_hooks} * sizeof(InitPlanWireHook)) || h_.hooks % 8 != 0) {
    return false;
  }
  if (h_.rw_dir >= len || h_.root_dir >= len || h_.hostname >= len) return false;
  data_ = data;
  len_ = len;
  for (uint32_t i = 0; i < h_.n_steps; ++i) {
    InitPlanWireStep s = step(i);
    if (s.kind < 1 || s.kind > 4 || s.source >= len || s.target >= len || s.fstype >= len || s.data >= len) {
      return false;
    }
  }
  for (uint32_t i = 0; i < h_.n_hooks; ++i) {
    InitPlanWireHook k;
    std::memcpy(&k, data + h_.hooks + i * sizeof(k), sizeof(k));
    if (k.kind < 1 || k.kind > 3 || !in(k.data, k.len) || k.data % 8 != 0 || k.stage > 1 || k.fd_index >= nfds) return false;
  }
  // The strings are terminated (the buffer ends with a NUL); the cgroup list must fit.
  size_t pos = h_.procs;
  for (uint32_t i = 0; i < h_.n_procs; ++i) {
    if (pos >= len - 1) return false;
    pos += std::strlen(data + pos) + 1;
  }
  for (int i = 0; i < nfds; ++i) fds_[i] = fds[i];
  nfds_ = nfds;
  userns_fd_ = userns_fd;
  return true;
}

InitPlanWireStep InitPlanView::step(uint32_t i) const {
  InitPlanWireStep s;
  std::memcpy(&s, data_ + h_.steps + i * sizeof(s), sizeof(s));
  return s;
}

int InitPlanView::RunHooks(uint32_t stage) const {
  for (uint32_t i = 0; i < h_.n_hooks; ++i) {
    InitPlanWireHook k;
    std::memcpy(&k, data_ + h_.hooks + i * sizeof(k), sizeof(k));
    if (k.stage != stage) continue;
    if (int err = RunChildHook(k.kind, data_ + k.data, k.len, k.fd_index >= 0 ? fds_[k.fd_index] : -1); err != 0) {
      return err;
    }
  }
  return 0;
}

}  // namespace flotilla::sandbox
