// What LandlockPlan::Create (landlock.cc) and the application of a plan (landlock_apply.cc)
// share: the kernel's access rights this build knows, the layout of an encoded plan, and the
// path containment rule. Header-only and libc-only: landlock_apply.cc is linked into the static
// sandbox zygote, which must not pull in the policy model.
#pragma once

#include <linux/landlock.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace flotilla::policies::landlock_encoding {

// Rights newer than this build's linux/landlock.h (values from the kernel's uapi header).
inline constexpr uint64_t kAccessRefer = 1ULL << 13;     // ABI 2
inline constexpr uint64_t kAccessTruncate = 1ULL << 14;  // ABI 3
inline constexpr uint64_t kAccessIoctlDev = 1ULL << 15;  // ABI 5
inline constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
inline constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6

inline constexpr uint64_t kAbi1Rights = (1ULL << 13) - 1;
inline constexpr uint64_t kReadRights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Rights that mean something on a file (rules on non-directories may hold only these).
inline constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                        LANDLOCK_ACCESS_FS_READ_FILE | kAccessTruncate | kAccessIoctlDev;

// The encoded plan: this header, then each rule (access, expand flag, path with its NUL), then
// the restricted paths with their NULs. Integers are copied with memcpy (no alignment).
struct EncodedHeader {
  uint32_t abi;
  uint32_t n_rules;
  uint32_t n_restricted;
  uint32_t pad;
  uint64_t handled;
};

// True when `inner` is `outer` or lies beneath it ("/a" contains "/a/b", not "/ab").
inline bool PathWithin(const char* outer, size_t outer_len, const char* inner) {
  if (outer_len == 1 && outer[0] == '/') return true;
  if (std::strncmp(outer, inner, outer_len) != 0) return false;
  return inner[outer_len] == '\0' || inner[outer_len] == '/';
}

}  // namespace flotilla::policies::landlock_encoding
