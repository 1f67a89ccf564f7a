// The inner kernels of the CPU backends' blocked attention (blocked_attention.cc), over one
// tile of kAttnKeyTile keys: scores of one query against the transposed key tile, their maximum
// over a range, the shifted exponentials of the tile's valid range (zero elsewhere; returns
// their sum), and the probability-weighted sum of the value rows added to an accumulator.
// Portable scalar code, AVX2/FMA and AVX-512F versions; the CPU is asked at run time.
#pragma once

namespace flotilla::inference {

constexpr int kKeyTile = 64;  // keys per tile (a multiple of 16)

// Which kernels run: the best the CPU has, or one named (tests compare them).
enum class AttnIsa { kBest, kScalar, kAvx2, kAvx512 };

struct AttnKernels {
  void (*scores)(const float* q, const float* kt, int k_dim, float scale, float* s);
  float (*max_range)(const float* s, int lo, int hi);
  float (*exp_shift)(float* s, int lo, int hi, float shift);
  void (*pv)(const float* p, const float* const* v, int lo, int hi, int v_dim, float* acc);
};

// The kernels of `isa` (kBest: AVX-512F, else AVX2/FMA, else scalar); null when the CPU lacks it.
const AttnKernels* AttnKernelsFor(AttnIsa isa);

}  // namespace flotilla::inference
