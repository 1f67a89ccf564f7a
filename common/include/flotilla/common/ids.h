// Identifiers: random, URL-safe, prefixed by kind ("sbx-3f9a1c0d2e7b4a55").
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flotilla {

// A new id: `prefix` + "-" + 16 lowercase hex digits from a process-wide CSPRNG-seeded source.
std::string NewId(std::string_view prefix);

// True for ids made of [a-z0-9-_.] of 1..128 characters (safe in paths and cgroup names).
bool IsSafeId(std::string_view id);

// A 64-bit random value (seeded once from the kernel).
uint64_t RandomU64();

}  // namespace flotilla
