// `flotilla model init --family qwen3_moe --tokenizer DIR --out DIR`: a random-init Hugging Face
// checkpoint folder of a small model with a real tokenizer's vocabulary and files (hf_init.h),
// e.g. a tiny Qwen3-MoE with Qwen3's 151,936-token vocabulary to serve with `flotilla up --model`.
#include <iostream>
#include <memory>

#include "commands.h"
#include "flotilla/inference/hf_init.h"

namespace flotilla::cli {

void AddModelInitVerb(CLI::App& model, int* exit_code) {
  CLI::App* cmd = model.add_subcommand("init", "Write a random-init Hugging Face model folder with a real tokenizer");
  auto o = std::make_shared<inference::HfInitOptions>();
  auto bf16 = std::make_shared<bool>(true);
  cmd->add_option("--family", o->family, "model_type: qwen3_moe or qwen3")->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "folder with tokenizer.json and tokenizer_config.json")->required();
  cmd->add_option("--out", o->out_dir, "the model folder to write")->required();
  cmd->add_option("--vocab-size", o->vocab_size, "embedding rows (0: the tokenizer's size)")->capture_default_str();
  cmd->add_option("--hidden", o->hidden_size, "hidden size")->capture_default_str();
  cmd->add_option("--layers", o->num_layers, "decoder layers")->capture_default_str();
  cmd->add_option("--heads", o->num_heads, "attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", o->num_kv_heads, "key/value heads")->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "head size")->capture_default_str();
  cmd->add_option("--experts", o->num_experts, "routed experts per MoE layer")->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "experts per token")->capture_default_str();
  cmd->add_option("--moe-intermediate", o->moe_intermediate_size, "expert MLP size")->capture_default_str();
  cmd->add_option("--intermediate", o->intermediate_size, "dense MLP size (qwen3)")->capture_default_str();
  cmd->add_option("--end-probability", o->end_probability,
                  "make the random model end a turn with about this chance per token (0: untouched)")
      ->capture_default_str();
  cmd->add_option("--context", o->max_position_embeddings, "max_position_embeddings")->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--bf16", *bf16, "store bf16 (false: f32)")->capture_default_str();
  cmd->callback([o, bf16, exit_code] {
    o->dtype = *bf16 ? inference::DType::kBF16 : inference::DType::kF32;
    absl::Status s = inference::WriteRandomHfModel(*o);
    if (!s.ok()) {
      std::cerr << "flotilla model init: " << s.message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << o->out_dir << "\n";
  });
}

}  // namespace flotilla::cli
