#!/usr/bin/env python3
"""Makes the tiny Hugging Face checkpoints and goldens under tests/inference/testdata/hf/.

Runs where torch and transformers 5.x are installed (nothing is downloaded: every config is built
here, weights are random with a fixed seed). For each fixture it writes, into OUTDIR/<name>/:
  config.json, model.safetensors (or shards + model.safetensors.index.json) via save_pretrained,
  golden.json: for each 64-token random id sequence, transformers' log_softmax log-prob of the
  next token at every position, the argmax, and the routed expert ids of every MoE layer
  (captured by hooks on the experts module / the router).
It also writes OUTDIR/state_dict_keys.txt: the state-dict key names and shapes transformers uses.

usage: make_hf_fixtures.py OUTDIR [NAME ...]   (names: only those fixtures; each keeps its seeds)
"""
import inspect
import json
import math
import os
import sys
import traceback

import torch

import transformers

VOCAB = 512
SEQ_LEN = 64
N_SEQS = 2


def make_config(cls, rope=None, **kw):
    """Builds a config; RoPE given as {"rope_type": ..., "rope_theta": ..., ...} in whichever form
    this transformers takes (rope_parameters in 5.x, rope_theta + rope_scaling before)."""
    params = inspect.signature(cls.__init__).parameters
    rope = dict(rope or {"rope_type": "default", "rope_theta": 10000.0})
    if "rope_parameters" in params:
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = rope.pop("rope_theta")
        if rope.get("rope_type", "default") != "default":
            kw["rope_scaling"] = rope
    cfg = cls(**kw)
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    return cfg


def fixtures():
    T = transformers
    common = dict(vocab_size=VOCAB, hidden_size=64, max_position_embeddings=256, rms_norm_eps=1e-6)
    out = []
    out.append(("qwen3_moe_a", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=96, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, tie_word_embeddings=False), {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("qwen3_moe_sparse", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, dict(
        common, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, head_dim=32,
        intermediate_size=80, moe_intermediate_size=24, num_experts=6, num_experts_per_tok=3,
        norm_topk_prob=False, mlp_only_layers=[0], decoder_sparse_step=1, tie_word_embeddings=True),
        {"rope_type": "default", "rope_theta": 50000.0}))
    out.append(("qwen3_moe_step2", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, dict(
        common, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
        intermediate_size=48, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, mlp_only_layers=[], decoder_sparse_step=2, tie_word_embeddings=True),
        {"rope_type": "default", "rope_theta": 1000000.0}))
    out.append(("qwen3_a", T.Qwen3Config, T.Qwen3ForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, tie_word_embeddings=True), {"rope_type": "default", "rope_theta": 1000000.0}))
    out.append(("qwen3_yarn", T.Qwen3Config, T.Qwen3ForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        intermediate_size=96, tie_word_embeddings=False, max_position_embeddings=1024),
        {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 256}))
    out.append(("llama_a", T.LlamaConfig, T.LlamaForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, tie_word_embeddings=False, rms_norm_eps=1e-5),
        {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("llama3_rope", T.LlamaConfig, T.LlamaForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
        intermediate_size=96, tie_word_embeddings=True, max_position_embeddings=2048),
        {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}))
    out.append(("mixtral_a", T.MixtralConfig, T.MixtralForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, tie_word_embeddings=False),
        {"rope_type": "default", "rope_theta": 1000000.0}))
    out.append(("mixtral_b", T.MixtralConfig, T.MixtralForCausalLM, dict(
        common, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=24, num_local_experts=4, num_experts_per_tok=3, tie_word_embeddings=True),
        {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("olmoe_a", T.OlmoeConfig, T.OlmoeForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=False,
        tie_word_embeddings=False), {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("olmoe_b", T.OlmoeConfig, T.OlmoeForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=24, num_experts=6, num_experts_per_tok=3, norm_topk_prob=True,
        tie_word_embeddings=True), {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("qwen2_moe_a", T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM, dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48,
        num_experts=8, num_experts_per_tok=2, norm_topk_prob=False, tie_word_embeddings=False),
        {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("qwen2_moe_sparse", T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM, dict(
        common, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
        intermediate_size=64, moe_intermediate_size=16, shared_expert_intermediate_size=32,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, mlp_only_layers=[1],
        decoder_sparse_step=1, tie_word_embeddings=True), {"rope_type": "default", "rope_theta": 10000.0}))
    ds = dict(common, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
              intermediate_size=96, moe_intermediate_size=24, n_routed_experts=8, n_shared_experts=1,
              num_experts_per_tok=2, n_group=4, topk_group=2, routed_scaling_factor=2.5,
              norm_topk_prob=True, first_k_dense_replace=1, kv_lora_rank=32, qk_rope_head_dim=8,
              qk_nope_head_dim=16, v_head_dim=16, tie_word_embeddings=False)
    out.append(("deepseek_v3_qlora", T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(
        ds, q_lora_rank=48), {"rope_type": "default", "rope_theta": 10000.0}))
    out.append(("deepseek_v3_yarn", T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(
        ds, q_lora_rank=None, max_position_embeddings=1024, n_group=2, topk_group=1,
        norm_topk_prob=False, routed_scaling_factor=1.5, tie_word_embeddings=True),
        {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 256,
         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}))
    # attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj biases (appended last: the earlier
    # fixtures keep their seeds).
    out.append(("deepseek_v3_bias", T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(
        ds, q_lora_rank=48, attention_bias=True), {"rope_type": "default", "rope_theta": 10000.0}))
    # DeepSeek-V3's own head sizes: 128 nope + 64 rope key dims, 128 value dims (2 layers of 2
    # heads, to keep the folder small).
    out.append(("deepseek_v3_wide", T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(
        ds, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=48,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128), {"rope_type": "default", "rope_theta": 10000.0}))
    return out


def perturb(model, gen):
    """Random weights at a scale where logits and routing are decisive; norms and biases moved
    away from their defaults; DeepSeek's e_score_correction_bias nonzero (positive)."""
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                p.copy_(0.1 * torch.rand(p.shape, generator=gen))
            elif not p.is_floating_point() or "rotary" in name or "inv_freq" in name:
                continue
            elif "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) * (1.5 / math.sqrt(fan_in)))


def find_index_tensor(args, kwargs, n_tokens):
    cands = list(args) + list(kwargs.values())
    for a in cands:
        if torch.is_tensor(a) and a.dtype in (torch.int64, torch.int32) and a.dim() == 2 and a.shape[0] == n_tokens:
            return a
    return None


def capture_routing(model, ids, top_k):
    """Runs the model; returns (logits, {layer: [[expert ids sorted ascending] per token]}) with the
    expert ids taken from the experts module's own arguments (transformers 5 passes
    top_k_index), or from the router's output."""
    routing = {}
    hooks = []
    n = ids.shape[1]
    for li, layer in enumerate(model.model.layers):
        mlp = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
        experts = getattr(mlp, "experts", None)
        if experts is None:
            continue

        def pre(mod, args, kwargs, li=li):
            idx = find_index_tensor(args, kwargs, n)
            if idx is not None:
                routing[li] = sorted_rows(idx)
        hooks.append(experts.register_forward_pre_hook(pre, with_kwargs=True))
        gate = getattr(mlp, "gate", None)
        if gate is not None:
            def post(mod, args, output, li=li):
                if li in routing:
                    return
                outs = output if isinstance(output, (tuple, list)) else (output,)
                for o in outs:
                    if torch.is_tensor(o) and o.dtype in (torch.int64, torch.int32) and o.dim() == 2:
                        routing[li] = sorted_rows(o)
                        return
                # A router that returns only its logits: softmax families route by their top-k;
                # DeepSeek-V3 by its grouped selection over sigmoid + e_score_correction_bias.
                o = outs[0]
                if torch.is_tensor(o) and o.is_floating_point() and o.dim() == 2:
                    bias = getattr(mod, "e_score_correction_bias", None)
                    if bias is None:
                        routing[li] = sorted_rows(torch.topk(o.float(), top_k, dim=-1).indices)
                    else:
                        routing[li] = sorted_rows(deepseek_select(o.float(), bias.float(), model.config, top_k))
            hooks.append(gate.register_forward_hook(post))
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    for h in hooks:
        h.remove()
    return logits, routing


def deepseek_select(logits, bias, cfg, top_k):
    scores = logits.sigmoid() + bias[None, :]
    n, e = scores.shape
    g = cfg.n_group
    group = scores.view(n, g, e // g).topk(2, dim=-1)[0].sum(-1)
    keep = torch.zeros_like(group).scatter_(1, group.topk(cfg.topk_group, dim=-1)[1], 1.0)
    mask = keep[:, :, None].expand(n, g, e // g).reshape(n, e)
    return scores.masked_fill(mask == 0, 0.0).topk(top_k, dim=-1)[1]


def sorted_rows(idx):
    return [sorted(int(v) for v in row) for row in idx.reshape(-1, idx.shape[-1]).tolist()]


def goldens(model, seed):
    gen = torch.Generator().manual_seed(seed)
    seqs = []
    for _ in range(N_SEQS):
        ids = torch.randint(0, VOCAB, (1, SEQ_LEN), generator=gen)
        logits, routing = capture_routing(model, ids, getattr(model.config, "num_experts_per_tok", 1))
        lp = torch.log_softmax(logits.double(), dim=-1)
        tgt = ids[0, 1:]
        seqs.append({
            "ids": ids[0].tolist(),
            "logprob": lp[:-1].gather(1, tgt[:, None])[:, 0].tolist(),
            "top1": lp[:-1].argmax(-1).tolist(),
            "experts": {str(k): v for k, v in sorted(routing.items())},
        })
    return {"sequences": seqs}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=None, separators=(",", ":"))
        f.write("\n")


def save(model, d, **kw):
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True, **kw)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)


def fp8_quantize(w):
    """128x128 block-scaled e4m3 (DeepSeek-V3's format): returns (fp8 weight, scale_inv) with
    w ~= fp8.float() * scale_inv[i // 128, j // 128]."""
    R, C = w.shape
    br, bc = (R + 127) // 128, (C + 127) // 128
    scale_inv = torch.empty(br, bc, dtype=torch.float32)
    q = torch.empty(R, C, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            s = blk.abs().max().clamp(min=1e-12) / 448.0
            scale_inv[i, j] = s
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (blk / s).to(torch.float8_e4m3fn)
    return q, scale_inv


def fp8_dequantize(q, scale_inv):
    R, C = q.shape
    s = scale_inv.repeat_interleave(128, 0)[:R].repeat_interleave(128, 1)[:, :C]
    return q.float() * s


def unfuse_experts(sd):
    """transformers-5 fused experts -> per-expert gate_proj/up_proj/down_proj (the older and
    DeepSeek release layout)."""
    out = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            p = k[: -len("gate_up_proj")]
            E, I2, _ = v.shape
            for e in range(E):
                out[f"{p}{e}.gate_proj.weight"] = v[e, : I2 // 2].contiguous()
                out[f"{p}{e}.up_proj.weight"] = v[e, I2 // 2:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            p = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{p}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v
    return out


def main():
    outdir = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(outdir, exist_ok=True)
    from safetensors.torch import save_file
    torch.set_num_threads(8)
    keys_report = []
    summary = {}
    for i, (name, ccls, mcls, kw, rope) in enumerate(fixtures()):
        if only and name not in only:
            continue
        try:
            cfg = make_config(ccls, rope=rope, **kw)
            torch.manual_seed(1000 + i)
            model = mcls(cfg).float().eval()
            perturb(model, torch.Generator().manual_seed(2000 + i))
            d = os.path.join(outdir, name)
            sharded = name == "qwen3_moe_a"
            save(model, d, **({"max_shard_size": "150KB"} if sharded else {}))
            g = goldens(model, 3000 + i)
            write_json(os.path.join(d, "golden.json"), g)
            sd = model.state_dict()
            keys_report.append(f"== {name} ({mcls.__name__})")
            keys_report += [f"{k} {list(v.shape)} {str(v.dtype).replace('torch.', '')}" for k, v in sd.items()]
            summary[name] = {"ok": True, "moe_layers": sorted(g["sequences"][0]["experts"].keys())}
            if name == "qwen3_moe_sparse":  # bf16 copy: reference from the bf16-rounded weights
                mb = mcls(cfg).eval()
                mb.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in sd.items()}, strict=False)
                db = os.path.join(outdir, name + "_bf16")
                gb = goldens(mb.float(), 3000 + i)
                save(mb.to(torch.bfloat16), db)
                write_json(os.path.join(db, "golden.json"), gb)
                summary[name + "_bf16"] = {"ok": True}
            if name == "deepseek_v3_qlora":  # FP8 block-scaled copy, per-expert layout
                q_sd, deq = {}, {}
                for k, v in unfuse_experts(sd).items():
                    if v.dim() == 2 and k.endswith(".weight") and "embed" not in k and "norm" not in k \
                            and "mlp.gate.weight" not in k:
                        q, s = fp8_quantize(v.float())
                        q_sd[k] = q
                        q_sd[k[: -len("weight")] + "weight_scale_inv"] = s
                        deq[k] = fp8_dequantize(q, s)
                    else:
                        q_sd[k] = v.contiguous()
                        deq[k] = v
                df = os.path.join(outdir, name + "_fp8")
                os.makedirs(df, exist_ok=True)
                save_file({k: v.contiguous() for k, v in q_sd.items()}, os.path.join(df, "model.safetensors"),
                          metadata={"format": "pt"})
                cj = json.load(open(os.path.join(d, "config.json")))
                cj["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                             "weight_block_size": [128, 128]}
                write_json(os.path.join(df, "config.json"), cj)
                # Reference from the dequantized weights, fused back into this transformers' layout.
                ref_sd = {}
                for k, v in sd.items():
                    if k.endswith("mlp.experts.gate_up_proj"):
                        p = k[: -len("gate_up_proj")]
                        ref_sd[k] = torch.stack([torch.cat([deq[f"{p}{e}.gate_proj.weight"],
                                                            deq[f"{p}{e}.up_proj.weight"]]) for e in range(v.shape[0])])
                    elif k.endswith("mlp.experts.down_proj"):
                        p = k[: -len("down_proj")]
                        ref_sd[k] = torch.stack([deq[f"{p}{e}.down_proj.weight"] for e in range(v.shape[0])])
                    elif k in deq:
                        ref_sd[k] = deq[k]
                    else:  # a per-expert layout in this transformers
                        ref_sd[k] = v
                mq = mcls(cfg).float().eval()
                missing = mq.load_state_dict(ref_sd, strict=False)
                for bname, b in model.named_buffers():
                    if bname.endswith("e_score_correction_bias"):
                        dict(mq.named_buffers())[bname].copy_(b)
                write_json(os.path.join(df, "golden.json"), goldens(mq, 3000 + i))
                summary[name + "_fp8"] = {"ok": True, "load": str(missing)}
        except Exception:
            summary[name] = {"ok": False, "error": traceback.format_exc()}
            print(f"FAILED {name}\n{traceback.format_exc()}", flush=True)
    with open(os.path.join(outdir, "state_dict_keys.txt"), "w") as f:
        f.write(f"transformers {transformers.__version__} torch {torch.__version__}\n")
        f.write("\n".join(keys_report) + "\n")
    write_json(os.path.join(outdir, "summary.json"), summary)
    print(json.dumps({k: v.get("ok") for k, v in summary.items()}))


if __name__ == "__main__":
    main()
