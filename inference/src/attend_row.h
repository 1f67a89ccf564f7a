// One query row of causal attention over a sequence's paged KV, shared by the CPU backends:
// scores q·k over positions lo..pos, a softmax, and the weighted sum of the values.
//
// `kv_at(j, kv)` returns the start of this head's K (kv = 0, k_dim floats) or V (kv = 1, v_dim
// floats) row for position j. Writes v_dim floats to `out`. Pure; thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace flotilla::inference {

template <class KvAt>
void AttendRow(const float* q, int k_dim, int v_dim, int lo, int pos, float scale, KvAt kv_at, float* out) {
  std::vector<float> scores(static_cast<size_t>(pos - lo + 1));
  float mx = -INFINITY;
  for (int j = lo; j <= pos; ++j) {
    const float* k = kv_at(j, 0);
    float s = 0;
    for (int d = 0; d < k_dim; ++d) s += q[d] * k[d];
    s *= scale;
    scores[j - lo] = s;
    mx = std::max(mx, s);
  }
  float sum = 0;
  for (float& s : scores) {
    s = std::exp(s - mx);
    sum += s;
  }
  std::fill(out, out + v_dim, 0.0f);
  for (int j = lo; j <= pos; ++j) {
    const float* v = kv_at(j, 1);
    const float p = scores[j - lo] / sum;
    for (int d = 0; d < v_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace flotilla::inference
