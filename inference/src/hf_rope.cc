// RoPE tables of the Hugging Face families, as transformers computes them
// (modeling_rope_utils.py): default, linear, llama3 and yarn inverse frequencies, yarn's factor
// on cos/sin, and DeepSeek-V3's softmax scale with mscale_all_dim.
#include <algorithm>
#include <cmath>

#include "flotilla/inference/hf_config.h"

namespace flotilla::inference {
namespace {

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

void HfConfig::RopeTables(std::vector<double>* inv_freq, double* attention_factor) const {
  const int dim = rope_dim(), half = dim / 2;
  inv_freq->assign(half, 0.0);
  *attention_factor = 1.0;
  // transformers computes these in float32: base ** (arange(0, dim, 2) / dim).
  for (int i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    (*inv_freq)[i] = static_cast<double>(1.0f / std::pow(static_cast<float>(rope.theta), expo));
  }
  if (rope.type == "linear") {
    for (double& f : *inv_freq) f /= rope.factor;
  } else if (rope.type == "llama3") {
    const double old_len = rope.original_max_position;
    const double low_wavelen = old_len / rope.low_freq_factor, high_wavelen = old_len / rope.high_freq_factor;
    for (double& f : *inv_freq) {
      const double wavelen = 2 * M_PI / f;
      double g = wavelen > low_wavelen ? f / rope.factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        const double smooth = (old_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
        g = (1 - smooth) * g / rope.factor + smooth * g;
      }
      f = g;
    }
  } else if (rope.type == "yarn") {
    // transformers: original_max_position_embeddings defaults to max_position_embeddings; a
    // missing factor is their ratio (DeepSeek-V3's convention).
    const double original = rope.original_max_position > 0 ? rope.original_max_position : max_position_embeddings;
    const double factor = rope.factor > 0 ? rope.factor : max_position_embeddings / original;
    if (rope.attention_factor >= 0) {
      *attention_factor = rope.attention_factor;
    } else if (rope.mscale != 0 && rope.mscale_all_dim != 0) {
      *attention_factor = YarnMscale(factor, rope.mscale) / YarnMscale(factor, rope.mscale_all_dim);
    } else {
      *attention_factor = YarnMscale(factor, 1.0);
    }
    auto correction_dim = [&](double rotations) {
      return (dim * std::log(original / (rotations * 2 * M_PI))) / (2 * std::log(rope.theta));
    };
    double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double extrapolation = (*inv_freq)[i], interpolation = extrapolation / factor;
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1.0 - ramp;
      (*inv_freq)[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  }
}

double HfConfig::attention_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(k_head_dim()));
  if (mla && rope.type != "default" && rope.mscale_all_dim != 0) {
    const double m = YarnMscale(rope.factor, rope.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

}  // namespace flotilla::inference
