// SyscallPolicy -> seccomp BPF, with libseccomp; programs cached per policy.
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::policies {
namespace {

// Owns a libseccomp filter context.
class FilterContext {
 public:
  explicit FilterContext(uint32_t def_action) : ctx_(seccomp_init(def_action)) {}
  ~FilterContext() {
    if (ctx_ != nullptr) seccomp_release(ctx_);
  }
  FilterContext(const FilterContext&) = delete;
  FilterContext& operator=(const FilterContext&) = delete;
  scmp_filter_ctx get() const { return ctx_; }

 private:
  scmp_filter_ctx ctx_;
};

absl::Status RuleError(std::string_view what, int rc) {
  return ErrnoStatus(absl::StrCat("seccomp rule for ", std::string(what)), -rc);
}

// Namespace-creating clone flags. CLONE_NEWTIME shares its bit with the exit signal in
// clone(2)'s flags, so it is checked for unshare only.
constexpr uint64_t kCloneNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                             CLONE_NEWCGROUP};

absl::Status AddNamespaceRules(scmp_filter_ctx ctx, uint32_t deny) {
  for (uint64_t flag : kCloneNamespaceFlags) {
    if (int rc = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)); rc < 0) {
      return RuleError("clone", rc);
    }
  }
  uint64_t unshare_flags[std::size(kCloneNamespaceFlags) + 1];
  std::copy(std::begin(kCloneNamespaceFlags), std::end(kCloneNamespaceFlags), unshare_flags);
  unshare_flags[std::size(kCloneNamespaceFlags)] = CLONE_NEWTIME;
  for (uint64_t flag : unshare_flags) {
    if (int rc = seccomp_rule_add(ctx, deny, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)); rc < 0) {
      return RuleError("unshare", rc);
    }
  }
  // clone3 passes its flags in memory that seccomp cannot read: make libc fall back to clone.
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0) {
    return RuleError("clone3", rc);
  }
  return absl::OkStatus();
}

absl::Status AddPersonalityRule(scmp_filter_ctx ctx, uint32_t deny) {
  // Docker allows PER_LINUX (0), PER_LINUX32 (0x8), UNAME26 (0x20000) and their combination.
  // libseccomp cannot compare one argument twice in a rule, so "any other bit set" is one
  // rule per bit. This also refuses the 0xffffffff query, which Docker allows.
  for (int bit = 0; bit < 32; ++bit) {
    const uint64_t mask = uint64_t{1} << bit;
    if (mask == 0x8 || mask == 0x20000) continue;
    if (int rc = seccomp_rule_add(ctx, deny, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, mask, mask));
        rc < 0) {
      return RuleError("personality", rc);
    }
  }
  return absl::OkStatus();
}

absl::Status AddTiocstiRule(scmp_filter_ctx ctx, uint32_t deny) {
  int rc = seccomp_rule_add(ctx, deny, SCMP_SYS(ioctl), 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, static_cast<uint64_t>(TIOCSTI)));
  return rc < 0 ? RuleError("ioctl TIOCSTI", rc) : absl::OkStatus();
}

absl::StatusOr<std::vector<sock_filter>> ExportBpf(scmp_filter_ctx ctx) {
  int fd = memfd_create("flotilla-seccomp", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("memfd_create");
  UniqueFd owned(fd);
  if (int rc = seccomp_export_bpf(ctx, fd); rc < 0) return ErrnoStatus("seccomp_export_bpf", -rc);
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) {
    return absl::InternalError(absl::StrCat("seccomp_export_bpf wrote ", size, " bytes"));
  }
  std::vector<sock_filter> insns(size / sizeof(sock_filter));
  if (pread(fd, insns.data(), size, 0) != size) return ErrnoStatus("reading the seccomp program");
  return insns;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SeccompProgram>> CompileSeccomp(const SyscallPolicy& policy,
                                                                     const SeccompOptions& options) {
  FilterContext ctx(SCMP_ACT_ALLOW);
  if (ctx.get() == nullptr) return absl::InternalError("seccomp_init failed");
  // A binary tree of syscall numbers keeps long deny lists cheap on every allowed call.
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  const uint32_t deny = options.count_violations ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
  for (const auto& name : policy.deny) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) return absl::InvalidArgumentError(absl::StrCat("unknown syscall '", name, "'"));
    if (int rc = seccomp_rule_add(ctx.get(), deny, nr, 0); rc < 0) return RuleError(name, rc);
  }
  if (policy.deny_namespace_flags) RETURN_IF_ERROR(AddNamespaceRules(ctx.get(), deny));
  if (policy.deny_personality) RETURN_IF_ERROR(AddPersonalityRule(ctx.get(), deny));
  if (policy.deny_tiocsti) RETURN_IF_ERROR(AddTiocstiRule(ctx.get(), deny));
  ASSIGN_OR_RETURN(std::vector<sock_filter> insns, ExportBpf(ctx.get()));
  bool has_rules = !policy.deny.empty() || policy.deny_namespace_flags || policy.deny_personality ||
                   policy.deny_tiocsti;
  return std::make_shared<const SeccompProgram>(std::move(insns), options.count_violations && has_rules);
}

absl::StatusOr<std::shared_ptr<const SeccompProgram>> SeccompCompiler::Get(const Policy& policy,
                                                                           const SeccompOptions& options) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_ptr<const SeccompProgram>>();
  const SyscallPolicy& sc = policy.syscalls;
  std::string key = absl::StrCat(absl::StrJoin(sc.deny, ","), "|", sc.deny_namespace_flags,
                                 sc.deny_personality, sc.deny_tiocsti, options.count_violations);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const SeccompProgram> program, CompileSeccomp(sc, options));
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(key, std::move(program)).first->second;
}

}  // namespace flotilla::policies
