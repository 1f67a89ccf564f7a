// The MoE block of the Hugging Face families: softmax top-k routing (mixtral, qwen2_moe,
// qwen3_moe, olmoe; renormalised when norm_topk_prob, always for mixtral) and DeepSeek-V3's
// sigmoid routing (e_score_correction_bias shifts the choice only; the top topk_group groups by
// the sum of their two best scores; weights renormalised when norm_topk_prob, then scaled by
// routed_scaling_factor); shared experts (qwen2_moe's behind a sigmoid gate).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "hf_ops.h"

namespace flotilla::inference {

void HfMatMulT(const float* x, const float* w, float* y, int M, int N, int K, bool accumulate) {
  if (M == 0 || N == 0) return;
  if (M == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, accumulate ? 1.0f : 0.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, accumulate ? 1.0f : 0.0f, y, N);
}

void HfApply(const HfLinear& l, const float* x, int M, float* y, bool accumulate) {
  HfMatMulT(x, l.w.data(), y, M, l.out, l.in, accumulate);
  if (l.b.empty()) return;
  for (int r = 0; r < M; ++r) {
    for (int o = 0; o < l.out; ++o) y[static_cast<size_t>(r) * l.out + o] += l.b[o];
  }
}

void HfRmsNorm(const float* x, const float* w, float* y, int D, float eps) {
  float ss = 0;
  for (int i = 0; i < D; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
  for (int i = 0; i < D; ++i) y[i] = w[i] * (x[i] * r);
}

namespace {

float Silu(float g) { return g / (1.0f + std::exp(-g)); }

// Indices of the k largest of v[0..n) (ties: the lower index first), best first.
void TopK(const float* v, int n, int k, std::vector<int>* order) {
  order->resize(n);
  std::iota(order->begin(), order->end(), 0);
  std::partial_sort(order->begin(), order->begin() + k, order->end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  order->resize(k);
}

// One row's routing: the chosen experts (best first) and their weights.
void Route(const HfConfig& c, const float* logits, const float* bias, const int32_t* replay, int32_t* chosen,
           float* weight) {
  const int E = c.num_experts, K = c.top_k;
  std::vector<float> p(E), choice;
  std::vector<int> order;
  if (c.router == Router::kSoftmax) {
    const float mx = *std::max_element(logits, logits + E);
    float sum = 0;
    for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[e] - mx));
    for (int e = 0; e < E; ++e) p[e] /= sum;
    if (replay == nullptr) TopK(p.data(), E, K, &order);
  } else {
    for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    if (replay == nullptr) {
      choice.resize(E);
      for (int e = 0; e < E; ++e) choice[e] = p[e] + bias[e];
      const int G = c.n_group, per = E / G;
      std::vector<float> group(G);
      std::vector<int> best;
      for (int g = 0; g < G; ++g) {
        TopK(&choice[g * per], per, 2, &best);
        group[g] = choice[g * per + best[0]] + choice[g * per + best[1]];
      }
      std::vector<int> groups;
      TopK(group.data(), G, c.topk_group, &groups);
      std::vector<float> masked(E, 0.0f);
      for (int g : groups) {
        for (int e = g * per; e < (g + 1) * per; ++e) masked[e] = choice[e];
      }
      TopK(masked.data(), E, K, &order);
    }
  }
  float tot = 0;
  for (int k = 0; k < K; ++k) {
    chosen[k] = replay != nullptr ? replay[k] : order[k];
    weight[k] = p[chosen[k]];
    tot += weight[k];
  }
  if (c.norm_topk_prob) {
    const float denom = c.router == Router::kSigmoidGrouped ? tot + 1e-20f : tot;
    for (int k = 0; k < K; ++k) weight[k] /= denom;
  }
  if (c.router == Router::kSigmoidGrouped) {
    for (int k = 0; k < K; ++k) weight[k] *= c.routed_scaling_factor;
  }
}

}  // namespace

void HfMlp(const HfLinear& gate, const HfLinear& up, const HfLinear& down, const float* x, int M, float* y,
           const float* row_scale) {
  const int I = gate.out, Hd = down.out;
  std::vector<float> g(static_cast<size_t>(M) * I), u(g.size()), o(static_cast<size_t>(M) * Hd);
  HfApply(gate, x, M, g.data());
  HfApply(up, x, M, u.data());
  for (size_t i = 0; i < g.size(); ++i) g[i] = Silu(g[i]) * u[i];
  HfApply(down, g.data(), M, o.data());
  for (int r = 0; r < M; ++r) {
    const float s = row_scale != nullptr ? row_scale[r] : 1.0f;
    for (int d = 0; d < Hd; ++d) y[static_cast<size_t>(r) * Hd + d] += s * o[static_cast<size_t>(r) * Hd + d];
  }
}

void HfMoe(const HfConfig& c, const HfLayerWeights& L, const float* xn, int T, float* x, int32_t* experts,
           const int32_t* replay, int stride) {
  const int Hd = c.hidden_size, E = c.num_experts, K = c.top_k, I = c.moe_intermediate_size;
  std::vector<float> logits(static_cast<size_t>(T) * E);
  HfMatMulT(xn, L.router.data(), logits.data(), T, E, Hd, false);
  std::vector<std::vector<std::pair<int, float>>> by_expert(E);  // (row, weight)
  std::vector<float> weight(K);
  for (int r = 0; r < T; ++r) {
    int32_t* chosen = experts + static_cast<size_t>(r) * stride;
    Route(c, &logits[static_cast<size_t>(r) * E], L.score_bias.data(),
          replay != nullptr ? replay + static_cast<size_t>(r) * stride : nullptr, chosen, weight.data());
    for (int k = 0; k < K; ++k) by_expert[chosen[k]].push_back({r, weight[k]});
  }
  std::vector<float> y(static_cast<size_t>(T) * Hd, 0.0f), xin, gu, act, out;
  for (int e = 0; e < E; ++e) {
    const auto& rows = by_expert[e];
    if (rows.empty()) continue;
    const int n = static_cast<int>(rows.size());
    xin.resize(static_cast<size_t>(n) * Hd);
    for (int i = 0; i < n; ++i) {
      std::memcpy(&xin[static_cast<size_t>(i) * Hd], xn + static_cast<size_t>(rows[i].first) * Hd, Hd * sizeof(float));
    }
    gu.resize(static_cast<size_t>(n) * 2 * I);
    act.resize(static_cast<size_t>(n) * I);
    out.resize(static_cast<size_t>(n) * Hd);
    HfMatMulT(xin.data(), &L.gate_up[static_cast<size_t>(e) * 2 * I * Hd], gu.data(), n, 2 * I, Hd, false);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < I; ++j) {
        act[static_cast<size_t>(i) * I + j] =
            Silu(gu[static_cast<size_t>(i) * 2 * I + j]) * gu[static_cast<size_t>(i) * 2 * I + I + j];
      }
    }
    HfMatMulT(act.data(), &L.experts_down[static_cast<size_t>(e) * Hd * I], out.data(), n, Hd, I, false);
    for (int i = 0; i < n; ++i) {
      float* yr = &y[static_cast<size_t>(rows[i].first) * Hd];
      for (int d = 0; d < Hd; ++d) yr[d] += rows[i].second * out[static_cast<size_t>(i) * Hd + d];
    }
  }
  if (c.shared_intermediate_size > 0) {
    std::vector<float> gate;
    if (c.shared_expert_gate) {
      gate.resize(T);
      HfMatMulT(xn, L.sh_gate_w.data(), gate.data(), T, 1, Hd, false);
      for (float& g : gate) g = 1.0f / (1.0f + std::exp(-g));
    }
    HfMlp(L.sh_gate, L.sh_up, L.sh_down, xn, T, y.data(), gate.empty() ? nullptr : gate.data());
  }
  for (size_t i = 0; i < y.size(); ++i) x[i] += y[i];
}

}  // namespace flotilla::inference
