// Fuzz targets of the parsers that read outside input. Each target file defines one with
//
//   FLOTILLA_FUZZ_TARGET(wire_chat) { ... parse data[0..size) ... }
//
// and is compiled twice: into a libFuzzer binary of its own (clang, ASan + UBSan; the build
// option FLOTILLA_FUZZ, label `fuzz`), and into fuzz_corpus_replay_test, a plain unit test that
// runs every target over its seed corpus and its regression inputs (tests/fuzz/corpus/<name>/)
// in the normal build. A target must not crash, leak, or hit undefined behaviour on any input;
// rejecting the input with a Status is the expected outcome for most of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace flotilla::fuzz {

using FuzzFunction = void (*)(const uint8_t* data, size_t size);

// Every target linked into this binary, by name.
std::map<std::string, FuzzFunction>& FuzzTargets();

struct FuzzTargetRegistration {
  FuzzTargetRegistration(const char* name, FuzzFunction fn) { FuzzTargets()[name] = fn; }
};

}  // namespace flotilla::fuzz

#define FLOTILLA_FUZZ_TARGET(name)                                                              \
  static void FlotillaFuzz_##name(const uint8_t* data, size_t size);                           \
  static ::flotilla::fuzz::FuzzTargetRegistration flotilla_fuzz_registration_##name(#name,      \
                                                                                    FlotillaFuzz_##name); \
  static void FlotillaFuzz_##name(const uint8_t* data, size_t size)
