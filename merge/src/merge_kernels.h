// The arithmetic of each merge method on one computation unit: n f32 values per parent, in
// memory, producing n f32 values. Reductions (norms, dot products, weighted sums) accumulate in
// double; deltas (model - base) are formed in f32 so magnitude trimming sees the values a
// PyTorch float32 reference sees. Semantics follow mergekit's:
//
//   linear          sum_i w_i m_i / (normalize ? sum_i w_i : 1)
//   slerp           spherical interpolation from the base (t=0) to the model (t=1) on the
//                   directions' angle; when |cos| > 0.9995 (nearly colinear) or a norm is ~0,
//                   linear interpolation instead
//   task_arithmetic base + lambda * sum_i w_i d_i (/ sum_i w_i when normalize), d_i = m_i - base
//   ties            d_i trimmed to its density*n largest magnitudes (ties broken by lower index),
//                   sign elected per element as the sign of sum_i w_i d_i (zero counts as +),
//                   disjoint mean: sum of agreeing w_i d_i over sum of agreeing w_i (1 when zero)
//   dare_linear     d_i kept where the DARE mask says (dare_mask.h) and scaled by 1/density, then
//                   as task_arithmetic
//   dare_ties       the DARE d_i, then TIES' sign election and disjoint mean
//   model_stock     c = mean pairwise cosine of the d_i, t = k c / (1 + (k-1) c) (0 when the
//                   denominator is ~0 or a d_i is ~0), out = t * mean_i m_i + (1 - t) * base
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flotilla/merge/merge_config.h"

namespace flotilla::merge {

struct UnitInputs {
  const float* base = nullptr;  // null for linear
  std::vector<const float*> models;
  size_t n = 0;
};

struct UnitParams {
  std::vector<double> weights;
  std::vector<double> densities;
  double t = 0.5;
  double lambda = 1.0;
  bool normalize = true;
  std::vector<uint64_t> dare_keys;  // per model (dare_mask.h)
  uint64_t index_offset = 0;        // the unit's first element's index in its tensor
};

// Reusable buffers, so a merge allocates them once at the largest unit's size.
struct UnitScratch {
  std::vector<std::vector<float>> deltas;
  std::vector<float> magnitudes;
};

void MergeUnit(MergeMethod method, const UnitInputs& in, const UnitParams& p, UnitScratch* scratch, float* out);

}  // namespace flotilla::merge
