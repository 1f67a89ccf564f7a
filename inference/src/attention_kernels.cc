#include "attention_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace flotilla::inference {
namespace {

void ScoresScalar(const float* q, const float* kt, int k_dim, float scale, float* s) {
  float acc[kKeyTile] = {};
  for (int d = 0; d < k_dim; ++d) {
    const float qd = q[d];
    const float* row = kt + static_cast<size_t>(d) * kKeyTile;
    for (int j = 0; j < kKeyTile; ++j) acc[j] += qd * row[j];
  }
  for (int j = 0; j < kKeyTile; ++j) s[j] = acc[j] * scale;
}

float MaxScalar(const float* s, int lo, int hi) {
  float mx = s[lo];
  for (int j = lo + 1; j < hi; ++j) mx = std::max(mx, s[j]);
  return mx;
}

float ExpShiftScalar(float* s, int lo, int hi, float shift) {
  float sum = 0;
  for (int j = 0; j < kKeyTile; ++j) {
    if (j < lo || j >= hi) {
      s[j] = 0;
      continue;
    }
    s[j] = std::exp(s[j] - shift);
    sum += s[j];
  }
  return sum;
}

void PvScalar(const float* p, const float* const* v, int lo, int hi, int v_dim, float* acc) {
  for (int j = lo; j < hi; ++j) {
    const float pj = p[j];
    const float* vr = v[j];
    for (int d = 0; d < v_dim; ++d) acc[d] += pj * vr[d];
  }
}

__attribute__((target("avx2,fma"))) void ScoresAvx2(const float* q, const float* kt, int k_dim, float scale, float* s) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int d = 0; d < k_dim; ++d) {
    const __m256 b = _mm256_broadcast_ss(q + d);
    const float* row = kt + static_cast<size_t>(d) * kKeyTile;
    a0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row), a0);
    a1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 8), a1);
    a2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 16), a2);
    a3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 24), a3);
    a4 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 32), a4);
    a5 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 40), a5);
    a6 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 48), a6);
    a7 = _mm256_fmadd_ps(b, _mm256_loadu_ps(row + 56), a7);
  }
  const __m256 sc = _mm256_set1_ps(scale);
  _mm256_storeu_ps(s, _mm256_mul_ps(a0, sc));
  _mm256_storeu_ps(s + 8, _mm256_mul_ps(a1, sc));
  _mm256_storeu_ps(s + 16, _mm256_mul_ps(a2, sc));
  _mm256_storeu_ps(s + 24, _mm256_mul_ps(a3, sc));
  _mm256_storeu_ps(s + 32, _mm256_mul_ps(a4, sc));
  _mm256_storeu_ps(s + 40, _mm256_mul_ps(a5, sc));
  _mm256_storeu_ps(s + 48, _mm256_mul_ps(a6, sc));
  _mm256_storeu_ps(s + 56, _mm256_mul_ps(a7, sc));
}

// exp(x) for x <= 0 (eight lanes): x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial
// for e^r (relative error about 2e-7), 2^n put into the exponent bits.
__attribute__((target("avx2,fma"))) __m256 ExpNonPositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// The lanes of [j, j + 8) inside [lo, hi).
__attribute__((target("avx2,fma"))) __m256 InRange(int j, int lo, int hi) {
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i in_lo = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1));
  const __m256i in_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx);
  return _mm256_castsi256_ps(_mm256_and_si256(in_lo, in_hi));
}

__attribute__((target("avx2,fma"))) float MaxAvx2(const float* s, int lo, int hi) {
  const __m256 neg = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 mx = neg;
  for (int j = lo / 8 * 8; j < hi; j += 8) {
    __m256 x = _mm256_loadu_ps(s + j);
    if (j < lo || j + 8 > hi) x = _mm256_blendv_ps(neg, x, InRange(j, lo, hi));
    mx = _mm256_max_ps(mx, x);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma"))) float ExpShiftAvx2(float* s, int lo, int hi, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  for (int j = 0; j < kKeyTile; j += 8) {
    if (j + 8 <= lo || j >= hi) {
      _mm256_storeu_ps(s + j, _mm256_setzero_ps());
      continue;
    }
    __m256 e = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), sh));
    if (j < lo || j + 8 > hi) e = _mm256_and_ps(e, InRange(j, lo, hi));  // exactly zero outside
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma"))) void PvAvx2(const float* p, const float* const* v, int lo, int hi, int v_dim,
                                                 float* acc) {
  int d0 = 0;
  for (; d0 + 32 <= v_dim; d0 += 32) {
    __m256 a0 = _mm256_loadu_ps(acc + d0), a1 = _mm256_loadu_ps(acc + d0 + 8);
    __m256 a2 = _mm256_loadu_ps(acc + d0 + 16), a3 = _mm256_loadu_ps(acc + d0 + 24);
    for (int j = lo; j < hi; ++j) {
      const __m256 b = _mm256_broadcast_ss(p + j);
      const float* vr = v[j] + d0;
      a0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr), a0);
      a1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 8), a1);
      a2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 16), a2);
      a3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 24), a3);
    }
    _mm256_storeu_ps(acc + d0, a0);
    _mm256_storeu_ps(acc + d0 + 8, a1);
    _mm256_storeu_ps(acc + d0 + 16, a2);
    _mm256_storeu_ps(acc + d0 + 24, a3);
  }
  for (; d0 + 8 <= v_dim; d0 += 8) {
    // Keys in four chains (j mod 4), added at the end: a short row would otherwise wait on the
    // latency of one chain of FMAs.
    __m256 a0 = _mm256_loadu_ps(acc + d0), a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1;
    int j = lo;
    for (; j + 3 < hi; j += 4) {
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(v[j] + d0), a0);
      a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 1), _mm256_loadu_ps(v[j + 1] + d0), a1);
      a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 2), _mm256_loadu_ps(v[j + 2] + d0), a2);
      a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 3), _mm256_loadu_ps(v[j + 3] + d0), a3);
    }
    for (; j < hi; ++j) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(v[j] + d0), a0);
    _mm256_storeu_ps(acc + d0, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  }
  for (; d0 < v_dim; ++d0) {
    float a = acc[d0];
    for (int j = lo; j < hi; ++j) a += p[j] * v[j][d0];
    acc[d0] = a;
  }
}

// The same kernels on sixteen lanes (AVX-512F).
__attribute__((target("avx512f"))) void ScoresAvx512(const float* q, const float* kt, int k_dim, float scale,
                                                     float* s) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int d = 0; d < k_dim; ++d) {
    const __m512 b = _mm512_set1_ps(q[d]);
    const float* row = kt + static_cast<size_t>(d) * kKeyTile;
    a0 = _mm512_fmadd_ps(b, _mm512_loadu_ps(row), a0);
    a1 = _mm512_fmadd_ps(b, _mm512_loadu_ps(row + 16), a1);
    a2 = _mm512_fmadd_ps(b, _mm512_loadu_ps(row + 32), a2);
    a3 = _mm512_fmadd_ps(b, _mm512_loadu_ps(row + 48), a3);
  }
  const __m512 sc = _mm512_set1_ps(scale);
  _mm512_storeu_ps(s, _mm512_mul_ps(a0, sc));
  _mm512_storeu_ps(s + 16, _mm512_mul_ps(a1, sc));
  _mm512_storeu_ps(s + 32, _mm512_mul_ps(a2, sc));
  _mm512_storeu_ps(s + 48, _mm512_mul_ps(a3, sc));
}

// Lanes of [j, j + 16) inside [lo, hi).
__attribute__((target("avx512f"))) __mmask16 InRange16(int j, int lo, int hi) {
  const int from = std::clamp(lo - j, 0, 16), to = std::clamp(hi - j, 0, 16);
  if (to <= from) return 0;
  const uint32_t upto = to == 16 ? 0xffffu : ((1u << to) - 1u);
  return static_cast<__mmask16>(upto & ~((1u << from) - 1u));
}

// GCC 12 warns that the unmasked forms of some AVX-512 intrinsics read an undefined source
// (-Wuninitialized); the masked forms below name every source and compute the same.
constexpr __mmask16 kAll = 0xffff;

__attribute__((target("avx512f"))) float Sum16(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float a = 0, b = 0;
  for (int i = 0; i < 16; i += 2) {
    a += t[i];
    b += t[i + 1];
  }
  return a + b;
}

__attribute__((target("avx512f"))) float Max16(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float m = t[0];
  for (int i = 1; i < 16; ++i) m = std::max(m, t[i]);
  return m;
}

__attribute__((target("avx512f"))) __m512 ExpNonPositive16(__m512 x) {
  x = _mm512_mask_max_ps(x, kAll, x, _mm512_set1_ps(-87.0f));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_mask_roundscale_ps(t, kAll, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i zero = _mm512_setzero_si512();
  const __m512i ni = _mm512_mask_cvtps_epi32(zero, kAll, n);
  const __m512i e = _mm512_mask_slli_epi32(zero, kAll, _mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

__attribute__((target("avx512f"))) float MaxAvx512(const float* s, int lo, int hi) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int j = lo / 16 * 16; j < hi; j += 16) {
    mx = _mm512_mask_max_ps(mx, InRange16(j, lo, hi), mx, _mm512_loadu_ps(s + j));
  }
  return Max16(mx);
}

__attribute__((target("avx512f"))) float ExpShiftAvx512(float* s, int lo, int hi, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < kKeyTile; j += 16) {
    const __mmask16 in = InRange16(j, lo, hi);
    const __m512 e = _mm512_maskz_mov_ps(in, ExpNonPositive16(_mm512_sub_ps(_mm512_loadu_ps(s + j), sh)));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  return Sum16(sum);
}

__attribute__((target("avx512f,avx2,fma"))) void PvAvx512(const float* p, const float* const* v, int lo, int hi, int v_dim,
                                                 float* acc) {
  int d0 = 0;
  for (; d0 + 64 <= v_dim; d0 += 64) {
    __m512 a0 = _mm512_loadu_ps(acc + d0), a1 = _mm512_loadu_ps(acc + d0 + 16);
    __m512 a2 = _mm512_loadu_ps(acc + d0 + 32), a3 = _mm512_loadu_ps(acc + d0 + 48);
    for (int j = lo; j < hi; ++j) {
      const __m512 b = _mm512_set1_ps(p[j]);
      const float* vr = v[j] + d0;
      a0 = _mm512_fmadd_ps(b, _mm512_loadu_ps(vr), a0);
      a1 = _mm512_fmadd_ps(b, _mm512_loadu_ps(vr + 16), a1);
      a2 = _mm512_fmadd_ps(b, _mm512_loadu_ps(vr + 32), a2);
      a3 = _mm512_fmadd_ps(b, _mm512_loadu_ps(vr + 48), a3);
    }
    _mm512_storeu_ps(acc + d0, a0);
    _mm512_storeu_ps(acc + d0 + 16, a1);
    _mm512_storeu_ps(acc + d0 + 32, a2);
    _mm512_storeu_ps(acc + d0 + 48, a3);
  }
  for (; d0 + 16 <= v_dim; d0 += 16) {
    __m512 a0 = _mm512_loadu_ps(acc + d0), a1 = _mm512_setzero_ps(), a2 = a1, a3 = a1;
    int j = lo;
    for (; j + 3 < hi; j += 4) {
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v[j] + d0), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]), _mm512_loadu_ps(v[j + 1] + d0), a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 2]), _mm512_loadu_ps(v[j + 2] + d0), a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 3]), _mm512_loadu_ps(v[j + 3] + d0), a3);
    }
    for (; j < hi; ++j) a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v[j] + d0), a0);
    _mm512_storeu_ps(acc + d0, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
  for (; d0 + 8 <= v_dim; d0 += 8) {  // a remainder of 8 floats
    __m256 a = _mm256_loadu_ps(acc + d0);
    for (int j = lo; j < hi; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v[j] + d0), a);
    _mm256_storeu_ps(acc + d0, a);
  }
  for (; d0 < v_dim; ++d0) {
    float a = acc[d0];
    for (int j = lo; j < hi; ++j) a += p[j] * v[j][d0];
    acc[d0] = a;
  }
}

}  // namespace

const AttnKernels* AttnKernelsFor(AttnIsa isa) {
  static const AttnKernels scalar{ScoresScalar, MaxScalar, ExpShiftScalar, PvScalar};
  static const AttnKernels avx2{ScoresAvx2, MaxAvx2, ExpShiftAvx2, PvAvx2};
  static const AttnKernels avx512{ScoresAvx512, MaxAvx512, ExpShiftAvx512, PvAvx512};
  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f");
  switch (isa) {
    case AttnIsa::kScalar:
      return &scalar;
    case AttnIsa::kAvx2:
      return has_avx2 ? &avx2 : nullptr;
    case AttnIsa::kAvx512:
      return has_avx512 ? &avx512 : nullptr;
    case AttnIsa::kBest:
      break;
  }
  return has_avx512 ? &avx512 : (has_avx2 ? &avx2 : &scalar);
}

}  // namespace flotilla::inference
