// The f32 building blocks of the CPU forward of Hugging Face families (hf_cpu_backend.cc,
// hf_moe.cc): products through OpenBLAS, RMSNorm, SiLU, and the MoE block of one layer.
#pragma once

#include <cstdint>
#include <vector>

#include "hf_weights.h"

namespace flotilla::inference {

// y[M,N] = x[M,K] * W[N,K]^T (+ y when accumulate).
void HfMatMulT(const float* x, const float* w, float* y, int M, int N, int K, bool accumulate);
// y[M, l.out] = x[M, l.in] * l.w^T + l.b (+ y when accumulate).
void HfApply(const HfLinear& l, const float* x, int M, float* y, bool accumulate = false);
void HfRmsNorm(const float* x, const float* w, float* y, int D, float eps);
// y[M, H] += down(silu(gate(x)) * up(x)) * scale (scale per row when given).
void HfMlp(const HfLinear& gate, const HfLinear& up, const HfLinear& down, const float* x, int M, float* y,
           const float* row_scale = nullptr);

// One MoE block over T rows: x += moe(xn). `experts` receives, per row, top_k expert ids in
// the router's selection order (best first); with `replay` (T x top_k ids, or null) those
// experts are used instead of the router's choice, weighted as the router weighs them. Rows
// are `stride` ints apart in both.
void HfMoe(const HfConfig& c, const HfLayerWeights& L, const float* xn, int T, float* x, int32_t* experts,
           const int32_t* replay, int stride);

}  // namespace flotilla::inference
