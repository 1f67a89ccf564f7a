#include "tensor_class.h"

#include <cctype>
#include <string_view>

namespace flotilla::merge {
namespace {

bool Has(std::string_view name, std::string_view part) { return name.find(part) != std::string_view::npos; }

// The N of "layers.N." (or "h.N." / "blocks.N." of other exporters), or -1.
int LayerIndex(std::string_view name) {
  for (std::string_view key : {"layers.", "blocks.", "h."}) {
    size_t pos = 0;
    while ((pos = name.find(key, pos)) != std::string_view::npos) {
      bool at_segment = pos == 0 || name[pos - 1] == '.';
      size_t i = pos + key.size();
      size_t j = i;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
      if (at_segment && j > i && j < name.size() && name[j] == '.') {
        return std::stoi(std::string(name.substr(i, j - i)));
      }
      pos = i;
    }
  }
  return -1;
}

}  // namespace

TensorPlace ClassifyTensor(const std::string& name, size_t rank) {
  TensorPlace p;
  p.layer = LayerIndex(name);
  std::string_view n = name;
  if (Has(n, "shared_expert") || Has(n, "moe.shared.")) {
    // Before "norm" and "gate": mlp.shared_expert_gate and shared experts' gate_proj belong here.
    p.cls = TensorClass::kSharedExperts;
    p.per_expert_slices = rank == 3 && Has(n, "moe.shared.");
  } else if (Has(n, "norm")) {
    p.cls = TensorClass::kNorms;
  } else if (Has(n, "embed") || Has(n, "lm_head") || Has(n, "wte.")) {
    p.cls = TensorClass::kEmbeddings;
  } else if (Has(n, "mlp.gate.") || Has(n, "block_sparse_moe.gate.") || Has(n, "moe.router") ||
             Has(n, "mlp.router.")) {
    p.cls = TensorClass::kRouter;
  } else if (Has(n, "mlp.experts.") || Has(n, "block_sparse_moe.experts.") || Has(n, "moe.experts.")) {
    p.cls = TensorClass::kRoutedExperts;
    p.per_expert_slices = rank == 3;  // fused gate_up_proj / down_proj, Flotilla's w1/w2/w3
  } else if (Has(n, "self_attn.") || Has(n, "attn.") || Has(n, "attention.")) {
    p.cls = TensorClass::kAttention;
  }
  p.at_end = p.layer < 0 && !Has(n, "embed") && !Has(n, "wte.");
  return p;
}

}  // namespace flotilla::merge
