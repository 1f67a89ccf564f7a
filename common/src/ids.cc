#include "flotilla/common/ids.h"

#include <sys/random.h>

#include <atomic>
#include <cstdio>

namespace flotilla {
namespace {
uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t Seed() {
  uint64_t s = 0;
  if (getrandom(&s, sizeof(s), 0) != sizeof(s)) s = reinterpret_cast<uintptr_t>(&s);
  return s;
}
}  // namespace

uint64_t RandomU64() {
  static std::atomic<uint64_t> counter{Seed()};
  return SplitMix(counter.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed));
}

std::string NewId(std::string_view prefix) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(RandomU64()));
  std::string out(prefix);
  out += '-';
  out += buf;
  return out;
}

bool IsSafeId(std::string_view id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace flotilla
