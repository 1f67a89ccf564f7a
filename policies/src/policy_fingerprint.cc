// Policy::Fingerprint: a digest over the canonical form of everything the enforcers read.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {
namespace {

// FNV-1a over 64 bits, twice with different offsets: stable across builds and platforms.
uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

void AppendRanges(const std::vector<PortRange>& ports, std::string* out) {
  for (const auto& r : ports) absl::StrAppend(out, r.lo, "-", r.hi, ",");
}

}  // namespace

std::string Policy::Fingerprint() const {
  std::string c;
  absl::StrAppend(&c, "class=", std::string(ExecutionClassName(execution_class)), "\n");
  for (const auto& p : filesystem.read_only) absl::StrAppend(&c, "ro=", p, "\n");
  for (const auto& p : filesystem.read_write) absl::StrAppend(&c, "rw=", p, "\n");
  for (const auto& p : filesystem.hidden) absl::StrAppend(&c, "hide=", p, "\n");
  for (const auto& r : network.allow) {
    absl::StrAppend(&c, "allow=", r.cidr.ToString(), ":");
    AppendRanges(r.ports, &c);
    c += "\n";
  }
  for (const auto& d : network.deny) absl::StrAppend(&c, "deny=", d.ToString(), "\n");
  for (const auto& s : syscalls.deny) absl::StrAppend(&c, "sys=", s, "\n");
  absl::StrAppend(&c, "ns=", syscalls.deny_namespace_flags, " pers=", syscalls.deny_personality,
                  " tiocsti=", syscalls.deny_tiocsti, "\n");
  const ResourcePolicy& r = resources;
  absl::StrAppend(&c, "res=", r.memory_bytes, ",", r.pids, ",", r.cpu_weight, ",", r.cpu_quota, ",",
                  r.disk_bytes, ",", r.exec_timeout_ms, ",", r.sandbox_timeout_ms, ",",
                  r.output_limit_bytes, "\n");
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(Fnv1a(c, 0xcbf29ce484222325ULL)),
                static_cast<unsigned long long>(Fnv1a(c, 0x84222325cbf29ce4ULL)));
  return buf;
}

}  // namespace flotilla::policies
