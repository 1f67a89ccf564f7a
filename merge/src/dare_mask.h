// DARE's drop mask, deterministic and documented so that any implementation can reproduce it
// (tests/merge/reference_merge.py does, in numpy):
//
//   mix(z)     = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
//                z ^= z >> 31                                (all arithmetic modulo 2^64)
//   name_hash  = FNV-1a 64 of the tensor's name bytes
//   key        = mix(seed ^ mix(name_hash ^ (model_index + 1) * 0x9E3779B97F4A7C15))
//   keep(i)    = (mix(key + i * 0x9E3779B97F4A7C15) >> 11) < density * 2^53
//
// where i is the element's index in the whole tensor (flattened, row-major) and model_index the
// model's position in the recipe's `models` list.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace flotilla::merge {

inline uint64_t Mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}

inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t DareKey(uint64_t seed, std::string_view tensor, size_t model_index) {
  return Mix64(seed ^ Mix64(Fnv1a64(tensor) ^ ((model_index + 1) * kGolden)));
}

// The threshold compared with the top 53 bits of the element's hash.
inline uint64_t DareThreshold(double density) {
  return static_cast<uint64_t>(std::ldexp(density, 53));
}

inline bool DareKeep(uint64_t key, uint64_t index, uint64_t threshold) {
  return (Mix64(key + index * kGolden) >> 11) < threshold;
}

}  // namespace flotilla::merge
