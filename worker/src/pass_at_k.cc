#include "flotilla/worker/pass_at_k.h"

#include <cmath>

namespace flotilla::worker {

double PassAtK(int n, int c, int k) {
  if (n <= 0 || k < 1 || k > n || c < 0 || c > n) return 0;
  if (n - c < k) return 1;
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i), which stays within double range.
  double fail = 1;
  for (int i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / i;
  return 1 - fail;
}

MeanAndError MeanWithStandardError(const std::vector<double>& values) {
  MeanAndError r;
  if (values.empty()) return r;
  double sum = 0;
  for (double v : values) sum += v;
  r.mean = sum / values.size();
  if (values.size() < 2) return r;
  double ss = 0;
  for (double v : values) ss += (v - r.mean) * (v - r.mean);
  r.standard_error = std::sqrt(ss / (values.size() - 1)) / std::sqrt(static_cast<double>(values.size()));
  return r;
}

}  // namespace flotilla::worker
