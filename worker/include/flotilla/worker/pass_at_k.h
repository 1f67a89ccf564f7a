// Evaluation statistics over repeated trials of tasks.
//
// pass@k is the unbiased estimator of Chen et al. (2021): for a task tried n times with c
// successes, 1 - C(n-c, k) / C(n, k), the probability that at least one of k trials drawn
// without replacement succeeds; averaged over tasks. Pure functions, thread-safe.
#pragma once

#include <vector>

namespace flotilla::worker {

// 1 - C(n-c, k)/C(n, k); 1 when n - c < k; requires 0 <= c <= n and 1 <= k <= n (else 0).
double PassAtK(int n, int c, int k);

struct MeanAndError {
  double mean = 0;
  double standard_error = 0;  // sample standard deviation / sqrt(count); 0 for fewer than 2
};
MeanAndError MeanWithStandardError(const std::vector<double>& values);

}  // namespace flotilla::worker
