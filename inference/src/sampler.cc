#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace flotilla::inference {

double SequenceRng::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

void LogSoftmax(const float* logits, int n, std::vector<float>* out) {
  out->resize(static_cast<size_t>(n));
  float mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  for (int i = 0; i < n; ++i) (*out)[i] = logits[i] - lse;
}

void TopK(const std::vector<float>& logprobs, uint32_t k, std::vector<int32_t>* ids,
          std::vector<float>* values) {
  const int n = static_cast<int>(logprobs.size());
  k = std::min<uint32_t>(k, static_cast<uint32_t>(n));
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
  });
  ids->assign(order.begin(), order.begin() + k);
  values->clear();
  for (uint32_t i = 0; i < k; ++i) values->push_back(logprobs[order[i]]);
}

void SampleToken(const float* logits, int vocab, const SamplingParams& p, SequenceRng* rng,
                 TokenRecord* rec) {
  std::vector<float> lp;
  LogSoftmax(logits, vocab, &lp);
  int32_t token = 0;
  if (p.temperature <= 0.0f) {
    token = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
  } else {
    // Distribution at temperature T, sorted descending, cut at top_p mass.
    std::vector<std::pair<double, int32_t>> probs(static_cast<size_t>(vocab));
    const double inv_t = 1.0 / p.temperature;
    double mx = -INFINITY;
    for (int i = 0; i < vocab; ++i) mx = std::max(mx, lp[i] * inv_t);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) {
      probs[i] = {std::exp(lp[i] * inv_t - mx), i};
      sum += probs[i].first;
    }
    std::sort(probs.begin(), probs.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    const double top_p = (p.top_p <= 0.0f || p.top_p >= 1.0f) ? 1.0 : p.top_p;
    size_t keep = probs.size();
    double mass = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
      mass += probs[i].first / sum;
      if (mass >= top_p) {
        keep = i + 1;
        break;
      }
    }
    double kept = 0;
    for (size_t i = 0; i < keep; ++i) kept += probs[i].first;
    double u = rng->Next() * kept;
    token = probs[keep - 1].second;
    for (size_t i = 0; i < keep; ++i) {
      u -= probs[i].first;
      if (u < 0) {
        token = probs[i].second;
        break;
      }
    }
  }
  rec->token = token;
  rec->logprob = lp[token];
  rec->top_ids.clear();
  rec->top_logprobs.clear();
  if (p.top_logprobs > 0) TopK(lp, p.top_logprobs, &rec->top_ids, &rec->top_logprobs);
}

}  // namespace flotilla::inference
