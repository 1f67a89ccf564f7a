#include "merge_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dare_mask.h"

namespace flotilla::merge {
namespace {

constexpr double kColinear = 0.9995;
constexpr double kEps = 1e-8;

double Dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

void Linear(const UnitInputs& in, const UnitParams& p, float* out) {
  double wsum = 0;
  for (double w : p.weights) wsum += w;
  const double scale = p.normalize && std::fabs(wsum) > kEps ? 1.0 / wsum : 1.0;
  for (size_t i = 0; i < in.n; ++i) {
    double s = 0;
    for (size_t m = 0; m < in.models.size(); ++m) s += p.weights[m] * in.models[m][i];
    out[i] = static_cast<float>(s * scale);
  }
}

void Slerp(const UnitInputs& in, const UnitParams& p, float* out) {
  const float* a = in.base;
  const float* b = in.models[0];
  const double na = std::sqrt(Dot(a, a, in.n)), nb = std::sqrt(Dot(b, b, in.n));
  double s0 = 1.0 - p.t, s1 = p.t;
  if (na > kEps && nb > kEps) {
    const double cos = Dot(a, b, in.n) / (na * nb);
    if (std::fabs(cos) <= kColinear) {
      const double theta = std::acos(cos), sin_theta = std::sin(theta);
      s0 = std::sin((1.0 - p.t) * theta) / sin_theta;
      s1 = std::sin(p.t * theta) / sin_theta;
    }
  }
  for (size_t i = 0; i < in.n; ++i) out[i] = static_cast<float>(s0 * a[i] + s1 * b[i]);
}

void Deltas(const UnitInputs& in, UnitScratch* s) {
  s->deltas.resize(in.models.size());
  for (size_t m = 0; m < in.models.size(); ++m) {
    s->deltas[m].resize(in.n);
    float* d = s->deltas[m].data();
    for (size_t i = 0; i < in.n; ++i) d[i] = in.models[m][i] - in.base[i];
  }
}

// Zeroes all but the k largest magnitudes (equal magnitudes: the lower index stays).
void TrimToDensity(std::vector<float>& d, double density, std::vector<float>& mags) {
  const size_t n = d.size();
  const size_t k = static_cast<size_t>(density * static_cast<double>(n));
  if (k >= n) return;
  if (k == 0) {
    std::fill(d.begin(), d.end(), 0.0f);
    return;
  }
  mags.resize(n);
  for (size_t i = 0; i < n; ++i) mags[i] = std::fabs(d[i]);
  std::nth_element(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(k - 1), mags.end(),
                   [](float x, float y) { return x > y; });
  const float threshold = mags[k - 1];
  size_t above = 0;
  for (size_t i = 0; i < n; ++i) above += std::fabs(d[i]) > threshold;
  size_t equal_left = k - above;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(d[i]);
    if (a > threshold) continue;
    if (a == threshold && equal_left > 0) {
      --equal_left;
      continue;
    }
    d[i] = 0.0f;
  }
}

void DareDrop(std::vector<float>& d, double density, uint64_t key, uint64_t offset) {
  const uint64_t threshold = DareThreshold(density);
  const double rescale = 1.0 / density;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i] = DareKeep(key, offset + i, threshold) ? static_cast<float>(d[i] * rescale) : 0.0f;
  }
}

// base + lambda * combined deltas: a plain (optionally normalized) weighted sum, or TIES' sign
// election and disjoint mean.
void Combine(const UnitInputs& in, const UnitParams& p, const UnitScratch& s, bool elect_sign, float* out) {
  const size_t k = in.models.size();
  double wsum = 0;
  for (double w : p.weights) wsum += w;
  for (size_t i = 0; i < in.n; ++i) {
    double mixed = 0;
    if (elect_sign) {
      double total = 0;
      for (size_t m = 0; m < k; ++m) total += p.weights[m] * s.deltas[m][i];
      const int majority = total >= 0 ? 1 : -1;
      double divisor = 0;
      for (size_t m = 0; m < k; ++m) {
        const double wd = p.weights[m] * s.deltas[m][i];
        const int sign = (wd > 0) - (wd < 0);
        if (sign == majority) {
          mixed += wd;
          divisor += p.weights[m];
        }
      }
      if (p.normalize) mixed /= std::fabs(divisor) < kEps ? 1.0 : divisor;
    } else {
      for (size_t m = 0; m < k; ++m) mixed += p.weights[m] * s.deltas[m][i];
      if (p.normalize) mixed /= std::fabs(wsum) < kEps ? 1.0 : wsum;
    }
    out[i] = static_cast<float>(in.base[i] + p.lambda * mixed);
  }
}

void ModelStock(const UnitInputs& in, UnitScratch* s, float* out) {
  Deltas(in, s);
  const size_t k = in.models.size();
  std::vector<double> norms(k);
  bool degenerate = false;
  for (size_t m = 0; m < k; ++m) {
    norms[m] = std::sqrt(Dot(s->deltas[m].data(), s->deltas[m].data(), in.n));
    degenerate |= norms[m] < kEps;
  }
  double t = 0;
  if (!degenerate) {
    double cos_sum = 0;
    size_t pairs = 0;
    for (size_t a = 0; a < k; ++a) {
      for (size_t b = a + 1; b < k; ++b) {
        cos_sum += Dot(s->deltas[a].data(), s->deltas[b].data(), in.n) / (norms[a] * norms[b]);
        ++pairs;
      }
    }
    const double cos = cos_sum / static_cast<double>(pairs);
    const double denom = 1.0 + static_cast<double>(k - 1) * cos;
    t = std::fabs(denom) < kEps ? 0.0 : static_cast<double>(k) * cos / denom;
  }
  for (size_t i = 0; i < in.n; ++i) {
    double avg = 0;
    for (size_t m = 0; m < k; ++m) avg += in.models[m][i];
    avg /= static_cast<double>(k);
    out[i] = static_cast<float>(t * avg + (1.0 - t) * in.base[i]);
  }
}

}  // namespace

void MergeUnit(MergeMethod method, const UnitInputs& in, const UnitParams& p, UnitScratch* s, float* out) {
  if (method != MergeMethod::kLinear && in.base == nullptr) {
    std::fprintf(stderr, "MergeUnit: %s without a base tensor\n", MergeMethodName(method));
    std::abort();  // RunMerge always passes one: an impossible state
  }
  switch (method) {
    case MergeMethod::kLinear:
      Linear(in, p, out);
      return;
    case MergeMethod::kSlerp:
      Slerp(in, p, out);
      return;
    case MergeMethod::kModelStock:
      ModelStock(in, s, out);
      return;
    case MergeMethod::kTaskArithmetic:
    case MergeMethod::kTies:
    case MergeMethod::kDareLinear:
    case MergeMethod::kDareTies:
      break;
  }
  Deltas(in, s);
  for (size_t m = 0; m < in.models.size(); ++m) {
    if (method == MergeMethod::kTies) TrimToDensity(s->deltas[m], p.densities[m], s->magnitudes);
    if (method == MergeMethod::kDareLinear || method == MergeMethod::kDareTies) {
      DareDrop(s->deltas[m], p.densities[m], p.dare_keys[m], p.index_offset);
    }
  }
  const bool elect = method == MergeMethod::kTies || method == MergeMethod::kDareTies;
  Combine(in, p, *s, elect, out);
}

}  // namespace flotilla::merge
