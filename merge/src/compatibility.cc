#include "compatibility.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensor_class.h"

namespace flotilla::merge {
namespace {

// config.json fields that change a tensor's shape or how tensors are used (Hugging Face names
// of the supported families, then Flotilla's ModelConfig names).
constexpr const char* kShapeFields[] = {
    "model_type", "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "moe_intermediate_size", "num_experts",
    "num_local_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "shared_expert_intermediate_size", "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_group",
    "topk_group", "vocab_size", "tie_word_embeddings",
    "n_layers", "d_model", "n_heads", "n_kv_heads", "n_experts", "top_k", "expert_hidden",
    "tie_embeddings"};

constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model",
                                           "tokenizer.tiktoken"};

std::string Shape(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

absl::Status Refuse(const Checkpoint& model, std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("model '", model.path(), "': ", std::string(what)));
}

std::string Contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::Status CheckCompatible(const Checkpoint& base, const Checkpoint& model) {
  const nlohmann::json& bc = base.config();
  const nlohmann::json& mc = model.config();
  if (bc.is_object() && mc.is_object()) {
    for (const char* field : kShapeFields) {
      const bool in_b = bc.contains(field), in_m = mc.contains(field);
      if (!in_b && !in_m) continue;
      if (in_b != in_m || bc[field] != mc[field]) {
        return Refuse(model, absl::StrCat("architecture differs from the base '", base.path(), "': config.json ",
                                          field, " is ", in_m ? mc[field].dump() : "absent", ", the base has ",
                                          in_b ? bc[field].dump() : "absent"));
      }
    }
  }
  for (const std::string& name : base.names()) {
    const inference::TensorView* b = base.Find(name);
    const inference::TensorView* m = model.Find(name);
    if (m == nullptr) {
      return Refuse(model, absl::StrCat("architecture differs from the base: no tensor '", name, "'"));
    }
    if (m->shape != b->shape) {
      const bool vocab = ClassifyTensor(name, b->shape.size()).cls == TensorClass::kEmbeddings;
      return Refuse(model, absl::StrCat(vocab ? "vocabulary" : "architecture", " differs from the base: tensor '",
                                        name, "' has shape ", Shape(m->shape), ", the base's is ",
                                        Shape(b->shape)));
    }
  }
  for (const std::string& name : model.names()) {
    if (base.Find(name) == nullptr) {
      return Refuse(model, absl::StrCat("architecture differs from the base: extra tensor '", name, "'"));
    }
  }
  if (base.is_folder() && model.is_folder()) {
    namespace fs = std::filesystem;
    for (const char* file : kTokenizerFiles) {
      fs::path bp = fs::path(base.folder()) / file, mp = fs::path(model.folder()) / file;
      const bool in_b = fs::exists(bp), in_m = fs::exists(mp);
      if (!in_b && !in_m) continue;
      if (in_b != in_m || Contents(bp) != Contents(mp)) {
        return Refuse(model, absl::StrCat("vocabulary differs from the base: ", file, " ",
                                          in_m ? (in_b ? "has different contents" : "is not in the base")
                                               : "is missing"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::merge
