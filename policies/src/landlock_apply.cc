// Applying an encoded Landlock plan in the calling process: raw system calls, no allocation.
// Kept apart from landlock.cc (the plan's construction from a policy) so that an executable
// that only applies plans (the static sandbox zygote) links libc and nothing else.
#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "flotilla/policies/child_enforcement.h"
#include "landlock_encoding.h"

namespace flotilla::policies {
namespace {

using namespace landlock_encoding;

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

// The work of ApplyEncodedLandlockPlan, with no allocation.
class Applier {
 public:
  // `restricted` holds `n_restricted` NUL-terminated paths back to back.
  Applier(int ruleset_fd, const char* restricted, uint32_t n_restricted)
      : ruleset_(ruleset_fd), restricted_(restricted), n_restricted_(n_restricted) {}

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
        const char* r = restricted_;
        for (uint32_t i = 0; i < n_restricted_; ++i, r += std::strlen(r) + 1) {
          if (std::strcmp(r, child) == 0) is_restricted = true;
          else if (PathWithin(child, child_len, r)) holds_restricted = true;
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
  const char* restricted_;
  uint32_t n_restricted_;
};

// Reads one NUL-terminated string at `*pos` of `data[0, len)`; nullptr when it runs past.
const char* TakeString(const char* data, size_t len, size_t* pos) {
  const void* nul = std::memchr(data + *pos, '\0', len - *pos);
  if (nul == nullptr) return nullptr;
  const char* s = data + *pos;
  *pos = static_cast<size_t>(static_cast<const char*>(nul) - data) + 1;
  return s;
}

}  // namespace

int ApplyEncodedLandlockPlan(const char* data, size_t len, const char** failed_step) noexcept {
  auto fail = [&](const char* step, int err) {
    if (failed_step != nullptr) *failed_step = step;
    return err;
  };
  EncodedHeader h;
  if (len < sizeof(h)) return fail("decoding the plan", EINVAL);
  std::memcpy(&h, data, sizeof(h));
  // Check the whole encoding before anything is applied.
  size_t pos = sizeof(h);
  for (uint32_t i = 0; i < h.n_rules; ++i) {
    if (len - pos < sizeof(uint64_t) + 1) return fail("decoding the plan", EINVAL);
    pos += sizeof(uint64_t) + 1;
    if (TakeString(data, len, &pos) == nullptr) return fail("decoding the plan", EINVAL);
  }
  const size_t restricted_at = pos;
  for (uint32_t i = 0; i < h.n_restricted; ++i) {
    if (TakeString(data, len, &pos) == nullptr) return fail("decoding the plan", EINVAL);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  RulesetAttr attr{};
  attr.handled_access_fs = h.handled;
  if (h.abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  size_t attr_size = h.abi >= 6 ? sizeof(RulesetAttr) : h.abi >= 4 ? 16 : 8;
  int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (ruleset < 0) return fail("landlock_create_ruleset", errno);
  Applier applier(ruleset, data + restricted_at, h.n_restricted);
  int err = 0;
  pos = sizeof(h);
  for (uint32_t i = 0; i < h.n_rules && err == 0; ++i) {
    uint64_t access;
    std::memcpy(&access, data + pos, sizeof(access));
    bool expand = data[pos + sizeof(access)] != 0;
    pos += sizeof(access) + 1;
    const char* path = TakeString(data, len, &pos);
    err = expand ? applier.Expand(path, access, 0) : applier.Grant(path, access);
  }
  if (err != 0) {
    close(ruleset);
    return fail("landlock_add_rule", err);
  }
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) err = fail("landlock_restrict_self", errno);
  close(ruleset);
  return err;
}

}  // namespace flotilla::policies
