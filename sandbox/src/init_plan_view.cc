// Reading an init plan in place and running its hooks, in the zygote and the init.
#include "init_plan_view.h"

#include <cerrno>
#include <cstring>

#include "flotilla/policies/child_enforcement.h"

namespace flotilla::sandbox {

int RunChildHook(uint32_t kind, const char* data, size_t len, int fd) noexcept {
  switch (static_cast<ChildHookKind>(kind)) {
    case ChildHookKind::kLandlock:
      return policies::ApplyEncodedLandlockPlan(data, len);
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
