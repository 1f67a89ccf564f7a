// `flotilla model init --family FAMILY --tokenizer DIR --out DIR`: a random-init Hugging Face
// checkpoint folder of a small model of any supported family (qwen3_moe, qwen3, llama, mixtral,
// olmoe, qwen2_moe, deepseek_v3) with a real tokenizer's vocabulary and files (hf_init.h), e.g. a
// tiny Qwen3-MoE with Qwen3's 151,936-token vocabulary to serve with `flotilla up --model`; or,
// with --vocab-size and no --tokenizer, a model without tokenizer files.
#include <iostream>
#include <memory>

#include "commands.h"
#include "flotilla/inference/hf_init.h"

namespace flotilla::cli {

void AddModelInitVerb(CLI::App& model, int* exit_code) {
  CLI::App* cmd = model.add_subcommand("init", "Write a random-init Hugging Face model folder with a real tokenizer");
  auto o = std::make_shared<inference::HfInitOptions>();
  auto bf16 = std::make_shared<bool>(true);
  cmd->add_option("--family", o->family, "model_type: qwen3_moe, qwen3, llama, mixtral, olmoe, qwen2_moe, deepseek_v3")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer_dir,
                  "folder with tokenizer.json and tokenizer_config.json (none: --vocab-size, no tokenizer files)");
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
  cmd->add_option("--intermediate", o->intermediate_size, "dense MLP size (and mixtral's / olmoe's experts')")
      ->capture_default_str();
  cmd->add_option("--mlp-only-layers", o->mlp_only_layers, "qwen3_moe / qwen2_moe: layers with a dense MLP");
  cmd->add_option("--norm-topk-prob", o->norm_topk_prob, "renormalise the top-k weights")->capture_default_str();
  cmd->add_option("--tie-embeddings", o->tie_word_embeddings, "no lm_head: the embedding is the output layer")
      ->capture_default_str();
  cmd->add_option("--fused-experts", o->fused_experts, "transformers 5's fused expert tensors")->capture_default_str();
  cmd->add_option("--attention-bias", o->attention_bias,
                  "q/k/v/o biases (deepseek_v3: q_a, kv_a and o biases)")->capture_default_str();
  cmd->add_option("--rope", o->rope_parameters, "rope_parameters as JSON")->capture_default_str();
  cmd->add_option("--shared-intermediate", o->shared_expert_intermediate_size, "qwen2_moe: shared expert size")
      ->capture_default_str();
  cmd->add_option("--sliding-window", o->sliding_window, "mixtral: sliding window (0: none)")->capture_default_str();
  cmd->add_option("--q-lora-rank", o->q_lora_rank, "deepseek_v3: q_lora_rank (0: q_proj)")->capture_default_str();
  cmd->add_option("--kv-lora-rank", o->kv_lora_rank, "deepseek_v3: kv_lora_rank")->capture_default_str();
  cmd->add_option("--qk-nope-dim", o->qk_nope_head_dim, "deepseek_v3: qk_nope_head_dim")->capture_default_str();
  cmd->add_option("--qk-rope-dim", o->qk_rope_head_dim, "deepseek_v3: qk_rope_head_dim")->capture_default_str();
  cmd->add_option("--v-head-dim", o->v_head_dim, "deepseek_v3: v_head_dim")->capture_default_str();
  cmd->add_option("--rope-interleave", o->rope_interleave, "deepseek_v3: rope_interleave")->capture_default_str();
  cmd->add_option("--n-group", o->n_group, "deepseek_v3: expert groups")->capture_default_str();
  cmd->add_option("--topk-group", o->topk_group, "deepseek_v3: groups kept per token")->capture_default_str();
  cmd->add_option("--shared-experts", o->n_shared_experts, "deepseek_v3: n_shared_experts")->capture_default_str();
  cmd->add_option("--first-dense", o->first_k_dense_replace, "deepseek_v3: first_k_dense_replace")
      ->capture_default_str();
  cmd->add_option("--routed-scaling", o->routed_scaling_factor, "deepseek_v3: routed_scaling_factor")
      ->capture_default_str();
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
