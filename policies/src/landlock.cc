// Landlock rulesets from the filesystem policy, applied with raw system calls.
#include "flotilla/policies/landlock.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::policies {
namespace {

// Rights newer than this build's linux/landlock.h (values from the kernel's uapi header).
constexpr uint64_t kAccessRefer = 1ULL << 13;     // ABI 2
constexpr uint64_t kAccessTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kAccessIoctlDev = 1ULL << 15;  // ABI 5
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6

constexpr uint64_t kAbi1Rights = (1ULL << 13) - 1;
constexpr uint64_t kReadRights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Rights that mean something on a file (rules on non-directories may hold only these).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kAccessTruncate | kAccessIoctlDev;

// The kernel's landlock_ruleset_attr as of ABI 6; older kernels accept it while the newer
// fields are zero.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

uint64_t HandledRights(int abi) {
  uint64_t r = kAbi1Rights;
  if (abi >= 2) r |= kAccessRefer;
  if (abi >= 3) r |= kAccessTruncate;
  if (abi >= 5) r |= kAccessIoctlDev;
  return r;
}

// True when `inner` is `outer` or lies beneath it ("/a" contains "/a/b", not "/ab").
bool PathWithin(const char* outer, size_t outer_len, const char* inner) {
  if (outer_len == 1 && outer[0] == '/') return true;
  if (std::strncmp(outer, inner, outer_len) != 0) return false;
  return inner[outer_len] == '\0' || inner[outer_len] == '/';
}

bool StrictlyBeneath(const std::string& outer, const std::string& inner) {
  return inner != outer && PathWithin(outer.c_str(), outer.size(), inner.c_str());
}

// The work of ApplyInChild, with no allocation.
class Applier {
 public:
  Applier(int ruleset_fd, const std::vector<std::string>& restricted) : ruleset_(ruleset_fd), restricted_(restricted) {}

  // Grants `access` beneath `path`; ENOENT paths are skipped.
  int Grant(const char* path, uint64_t access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : errno;
    int err = AddRule(fd, access);
    close(fd);
    return err;
  }

  // Grants `access` to every entry beneath directory `path` except restricted ones, descending
  // into entries that hold restricted paths; the directory itself gets only listing.
  int Expand(const char* path, uint64_t access, int depth) {
    if (depth > 64) return ELOOP;
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return errno == ENOENT ? 0 : errno;
    int err = AddRule(dir, access & LANDLOCK_ACCESS_FS_READ_DIR);
    alignas(8) char buf[2048];
    size_t path_len = std::strlen(path);
    while (err == 0) {
      long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
      if (n < 0) { err = errno; break; }
      if (n == 0) break;
      for (long off = 0; off < n && err == 0;) {
        auto* d = reinterpret_cast<dirent64*>(buf + off);
        off += d->d_reclen;
        if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
        char child[PATH_MAX];
        size_t name_len = std::strlen(d->d_name);
        if (path_len + 1 + name_len + 1 > sizeof(child)) { err = ENAMETOOLONG; break; }
        size_t base = (path_len == 1) ? 0 : path_len;  // "/" + "etc", not "//etc"
        std::memcpy(child, path, base);
        child[base] = '/';
        std::memcpy(child + base + 1, d->d_name, name_len + 1);
        size_t child_len = base + 1 + name_len;
        bool is_restricted = false;
        bool holds_restricted = false;
        for (const auto& r : restricted_) {
          if (std::strcmp(r.c_str(), child) == 0) is_restricted = true;
          else if (PathWithin(child, child_len, r.c_str())) holds_restricted = true;
        }
        if (is_restricted) continue;  // its own rule (or none, when hidden) applies
        err = holds_restricted ? Expand(child, access, depth + 1) : Grant(child, access);
      }
    }
    close(dir);
    return err;
  }

 private:
  int AddRule(int fd, uint64_t access) {
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    if (!S_ISDIR(st.st_mode)) access &= kFileRights;
    if (access == 0) return 0;
    PathBeneathAttr attr{access, fd};
    if (syscall(SYS_landlock_add_rule, ruleset_, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0) return errno;
    return 0;
  }

  int ruleset_;
  const std::vector<std::string>& restricted_;
};

}  // namespace

int LandlockAbiVersion() {
  long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

absl::StatusOr<LandlockPlan> LandlockPlan::Create(const FilesystemPolicy& policy) {
  LandlockPlan plan;
  plan.abi_ = LandlockAbiVersion();
  if (plan.abi_ == 0) {
    return absl::FailedPreconditionError("landlock: not available in this kernel (or disabled at boot)");
  }
  plan.handled_ = HandledRights(plan.abi_);
  for (const auto* list : {&policy.read_only, &policy.read_write, &policy.hidden}) {
    for (const auto& p : *list) {
      if (p.empty() || p[0] != '/') {
        return absl::InvalidArgumentError(absl::StrCat("landlock: path '", p, "' must be absolute"));
      }
    }
  }
  for (const auto& p : policy.read_only) plan.rules_.push_back(Rule{p, kReadRights & plan.handled_});
  for (const auto& p : policy.read_write) plan.rules_.push_back(Rule{p, plan.handled_});
  // Landlock only adds rights going down a tree. A hidden path, or a path with fewer rights,
  // beneath a granted one makes the granted one expand into its other entries.
  plan.hidden_ = policy.hidden;
  for (const auto& inner : plan.rules_) {
    for (const auto& outer : plan.rules_) {
      if (StrictlyBeneath(outer.path, inner.path) && (outer.access & ~inner.access) != 0 &&
          std::find(plan.hidden_.begin(), plan.hidden_.end(), inner.path) == plan.hidden_.end()) {
        plan.restricted_.push_back(inner.path);
        break;
      }
    }
  }
  plan.restricted_.insert(plan.restricted_.end(), plan.hidden_.begin(), plan.hidden_.end());
  for (auto& rule : plan.rules_) {
    for (const auto& r : plan.restricted_) rule.expand = rule.expand || StrictlyBeneath(rule.path, r);
  }
  // A hidden path that is itself a rule's path gets no rule at all.
  plan.rules_.erase(std::remove_if(plan.rules_.begin(), plan.rules_.end(),
                                   [&](const Rule& r) {
                                     return std::find(plan.hidden_.begin(), plan.hidden_.end(), r.path) !=
                                            plan.hidden_.end();
                                   }),
                    plan.rules_.end());
  return plan;
}

int LandlockPlan::ApplyInChild(const char** failed_step) const noexcept {
  auto fail = [&](const char* step, int err) {
    if (failed_step != nullptr) *failed_step = step;
    return err;
  };
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  RulesetAttr attr{};
  attr.handled_access_fs = handled_;
  if (abi_ >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  size_t attr_size = abi_ >= 6 ? sizeof(RulesetAttr) : abi_ >= 4 ? 16 : 8;
  int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (ruleset < 0) return fail("landlock_create_ruleset", errno);
  Applier applier(ruleset, restricted_);
  int err = 0;
  for (const auto& rule : rules_) {
    err = rule.expand ? applier.Expand(rule.path.c_str(), rule.access, 0)
                      : applier.Grant(rule.path.c_str(), rule.access);
    if (err != 0) {
      close(ruleset);
      return fail("landlock_add_rule", err);
    }
  }
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) err = fail("landlock_restrict_self", errno);
  close(ruleset);
  return err;
}

absl::Status LandlockPlan::Apply() const {
  const char* step = "";
  if (int err = ApplyInChild(&step); err != 0) return ErrnoStatus(absl::StrCat("landlock: ", step), err);
  return absl::OkStatus();
}

}  // namespace flotilla::policies
