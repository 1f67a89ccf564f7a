"""Hugging Face transformers' `generate` on a Qwen3-30B-A3B-shaped qwen3_moe with LAYERS layers
(random init, bf16, on the GPU): the comparison figure of `flotilla_engine_bench --gpu-hf`.

  hf_generate_torch.py LAYERS PROMPT_LEN NEW_TOKENS BATCH... -> name=value lines
Greedy, every row generating exactly NEW_TOKENS (min_new_tokens), the default dynamic KV
cache; tokens/s = BATCH * NEW_TOKENS / the generate call's wall time (prefill included), after
one warm-up call.
"""
import sys
import time

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM


def main():
    layers, prompt_len, new_tokens = (int(a) for a in sys.argv[1:4])
    batches = [int(b) for b in sys.argv[4:]]
    config = Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, num_hidden_layers=layers, num_attention_heads=32,
                            num_key_value_heads=4, head_dim=128, intermediate_size=6144, moe_intermediate_size=768,
                            num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
                            mlp_only_layers=[], rms_norm_eps=1e-6, max_position_embeddings=40960,
                            rope_theta=1000000.0, tie_word_embeddings=False)
    torch.manual_seed(0)
    # Made in bf16 on the GPU (an f32 copy of 48 layers would not fit beside the bf16 one).
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Qwen3MoeForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    print(f"torch.hf_generate_layers={layers}")
    g = torch.Generator(device="cuda").manual_seed(0)
    for i, batch in enumerate(batches):
        ids = torch.randint(0, config.vocab_size, (batch, prompt_len), generator=g, device="cuda")
        mask = torch.ones_like(ids)
        kw = dict(attention_mask=mask, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                  pad_token_id=0, eos_token_id=None)
        with torch.inference_mode():
            if i == 0:
                model.generate(ids, **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        assert out.shape[1] == prompt_len + new_tokens, out.shape
        print(f"torch.hf_generate_tps_b{batch}={batch * new_tokens / dt:.1f}")
        print(f"torch.hf_generate_ms_per_step_b{batch}={dt * 1e3 / new_tokens:.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
