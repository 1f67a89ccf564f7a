"""Makes the Hugging Face fixtures in testdata/hf/ and checks the trainer's own modules on them.

Runs where transformers 5.x is installed (not on the CI machine):
  python3 make_hf_fixtures.py OUT_DIR [TRAINER_PYTHON_DIR]
  python3 make_hf_fixtures.py --fuse SRC_FIXTURE DST_FIXTURE   (no transformers needed)
For each family it builds a tiny random-init model with transformers (fixed seed, norms, biases
and DeepSeek's e_score_correction_bias moved off their defaults), saves it with save_pretrained
(some in bf16/f16, one sharded; some rewritten to the per-expert layout or Mixtral's original
block_sparse_moe names, one with an extra multi-token-prediction layer), and writes golden.json:
token ids, transformers' float32 log-probs of each next token, argmax ids and the experts each
MoE layer chose. Then it loads every folder with flotilla_trainer.hf, compares log-probs and
routing, replays transformers' routing, publishes the folder with save_folder and loads that
back with transformers (logits must be identical), and does the same after changing every weight. Prints a table; writes report.json.
"""
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_PY = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HERE, "..", "..", "trainer_bridge", "python")
sys.path.insert(0, _PY)

from flotilla_trainer.hf import load_folder, save_folder  # noqa: E402

COMMON = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, rms_norm_eps=1e-6,
              max_position_embeddings=128, initializer_range=0.1, tie_word_embeddings=False)
YARN_DS = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
           "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
SPECS = [
    ("qwen3_moe", "qwen3_moe", dict(num_hidden_layers=3, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                                    moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                    mlp_only_layers=[1], decoder_sparse_step=1), {}),
    ("qwen3_moe_bf16_sharded", "qwen3_moe", dict(num_hidden_layers=2, num_key_value_heads=2, head_dim=16,
                                                 intermediate_size=96, moe_intermediate_size=32, num_experts=8,
                                                 num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=2,
                                                 attention_bias=True, tie_word_embeddings=True),
     {"dtype": torch.bfloat16, "shard": "100KB"}),
    ("qwen2_moe_per_expert", "qwen2_moe", dict(num_hidden_layers=2, num_key_value_heads=2, intermediate_size=96,
                                               moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                               num_experts=8, num_experts_per_tok=2, norm_topk_prob=False),
     {"layout": "per_expert"}),
    ("mixtral_legacy", "mixtral", dict(num_hidden_layers=2, num_key_value_heads=2, intermediate_size=48,
                                       num_local_experts=4, num_experts_per_tok=2), {"layout": "mixtral"}),
    ("olmoe_f16", "olmoe", dict(num_hidden_layers=2, num_key_value_heads=4, intermediate_size=32, num_experts=8,
                                num_experts_per_tok=2, norm_topk_prob=False), {"dtype": torch.float16}),
    ("deepseek_v3", "deepseek_v3", dict(num_hidden_layers=3, num_key_value_heads=4, intermediate_size=96,
                                        moe_intermediate_size=32, n_routed_experts=8, n_group=4, topk_group=2,
                                        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                                        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                        v_head_dim=16, routed_scaling_factor=2.5, norm_topk_prob=True,
                                        num_nextn_predict_layers=1, rope_parameters=YARN_DS), {"mtp": True}),
    ("deepseek_v3_nolora_bf16", "deepseek_v3", dict(num_hidden_layers=2, num_key_value_heads=4, intermediate_size=96,
                                                    moe_intermediate_size=32, n_routed_experts=8, n_group=1,
                                                    topk_group=1, num_experts_per_tok=2, n_shared_experts=2,
                                                    first_k_dense_replace=0, q_lora_rank=None, kv_lora_rank=32,
                                                    qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                                    routed_scaling_factor=1.0, norm_topk_prob=False),
     {"dtype": torch.bfloat16, "layout": "per_expert"}),
    ("qwen3_yarn", "qwen3", dict(num_hidden_layers=2, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                                 rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                  "original_max_position_embeddings": 32}), {}),
    ("llama3_rope", "llama", dict(num_hidden_layers=2, num_key_value_heads=2, intermediate_size=96, attention_bias=True,
                                  mlp_bias=True, tie_word_embeddings=True,
                                  rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 64}), {}),
]


def perturb(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith("inv_freq") or not p.is_floating_point():
                continue
            if "norm" in name:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def rewrite_layout(folder, layout, mtp, cfg):
    from safetensors.torch import load_file, save_file
    path = os.path.join(folder, "model.safetensors")
    t = load_file(path)
    out = {}
    for k, v in t.items():
        if layout and k.endswith(".mlp.experts.gate_up_proj"):
            base = k[: -len("gate_up_proj")]
            I = v.shape[1] // 2
            names = ("w1", "w3") if layout == "mixtral" else ("gate_proj", "up_proj")
            for e in range(v.shape[0]):
                out[f"{base}{e}.{names[0]}.weight"] = v[e, :I].contiguous()
                out[f"{base}{e}.{names[1]}.weight"] = v[e, I:].contiguous()
        elif layout and k.endswith(".mlp.experts.down_proj"):
            base = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{base}{e}.{'w2' if layout == 'mixtral' else 'down_proj'}.weight"] = v[e].contiguous()
        else:
            out[k] = v
    if layout == "mixtral":
        out = {(k.replace(".mlp.", ".block_sparse_moe.") if ".mlp." in k else k): v for k, v in out.items()}
    if mtp:  # a multi-token-prediction layer past num_hidden_layers, as DeepSeek-V3 ships it
        L, H = cfg.num_hidden_layers, cfg.hidden_size
        g = torch.Generator().manual_seed(5)
        for n, shape in (("enorm.weight", [H]), ("hnorm.weight", [H]), ("eh_proj.weight", [H, 2 * H]),
                         ("input_layernorm.weight", [H]), ("shared_head.norm.weight", [H])):
            out[f"model.layers.{L}.{n}"] = torch.randn(shape, generator=g).to(next(iter(t.values())).dtype)
    save_file(out, path, metadata={"format": "pt"})


def routing_hooks(model):
    found = []
    mods = [m for n, m in model.named_modules() if n.endswith("mlp.experts") or n.endswith("block_sparse_moe.experts")]

    def hook(mod, args, kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if torch.is_tensor(a) and not a.is_floating_point() and a.dim() == 2:
                found.append(a.detach().clone())
                return
    try:
        handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in mods]
    except TypeError:  # torch < 2.0: positional arguments only
        handles = [m.register_forward_pre_hook(hook) for m in mods]
    return found, handles


def hf_load(folder):
    from transformers import AutoModelForCausalLM
    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    except TypeError:
        return AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager").eval()


def fuse_experts(src, dst):
    """Writes src's checkpoint with its experts in transformers 5's in-memory layout
    (mlp.experts.gate_up_proj [E, 2I, H], gate rows first; mlp.experts.down_proj [E, H, I]),
    the fused form a file can also hold. transformers 5.17's save_pretrained writes one tensor per
    expert, so the fused fixture is this rewrite of a transformers-made file; golden.json is
    src's (the same weights)."""
    import re
    import shutil
    from flotilla_trainer.safetensors_io import load_file, save_file
    os.makedirs(dst, exist_ok=True)
    t = load_file(os.path.join(src, "model.safetensors"))
    per = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
    groups, out = {}, {}
    for k, v in t.items():
        m = per.match(k)
        if m:
            groups.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = v
        else:
            out[k] = v
    for base, projs in groups.items():
        stack = {p: torch.stack([e[i] for i in sorted(e)]) for p, e in projs.items()}
        out[base + ".gate_up_proj"] = torch.cat([stack["gate_proj"], stack["up_proj"]], dim=1)
        out[base + ".down_proj"] = stack["down_proj"]
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(src, "config.json"), dst)
    with open(os.path.join(src, "golden.json")) as f:
        g = json.load(f)
    g["layout"] = f"fused experts, rewritten from {os.path.basename(os.path.normpath(src))} by fuse_experts"
    with open(os.path.join(dst, "golden.json"), "w") as f:
        json.dump(g, f)


def main():
    if sys.argv[1] == "--fuse":
        fuse_experts(sys.argv[2], sys.argv[3])
        return
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.set_num_threads(8)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for n, (name, mtype, kw, opt) in enumerate(SPECS):
        t0 = time.time()
        row = {"fixture": name}
        try:
            folder = os.path.join(out_dir, name)
            cfg = AutoConfig.for_model(mtype, **{**COMMON, **kw})
            torch.manual_seed(100 + n)
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
            perturb(model, 200 + n)
            saved = model.to(opt.get("dtype", torch.float32))
            saved.save_pretrained(folder, max_shard_size=opt.get("shard", "50GB"))
            if opt.get("layout") or opt.get("mtp"):
                rewrite_layout(folder, opt.get("layout"), opt.get("mtp"), cfg)
            try:
                ref = hf_load(folder)
                row["hf_loads_fixture"] = True
            except Exception as e:  # the reference then is the model in memory, in float32
                row["hf_loads_fixture"] = f"no: {type(e).__name__}: {str(e)[:200]}"
                ref = model.float().eval()
            ids = torch.randint(0, cfg.vocab_size, (2, 64), generator=torch.Generator().manual_seed(300 + n))
            found, handles = routing_hooks(ref)
            with torch.no_grad():
                logits = ref(ids).logits.float()
            for h in handles:
                h.remove()
            lp = torch.log_softmax(logits, -1)
            tgt = lp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
            routing = torch.stack([f.view(2, 64, -1) for f in found], dim=2) if found else torch.zeros(2, 64, 0, 1, dtype=torch.long)
            routing = routing.sort(-1).values
            golden = {"ids": ids.tolist(), "logprobs": tgt.tolist(), "top1": logits[:, :-1].argmax(-1).tolist(),
                      "routing": routing.tolist(), "transformers": transformers.__version__,
                      "torch": torch.__version__, "dtype": str(opt.get("dtype", torch.float32))}
            with open(os.path.join(folder, "golden.json"), "w") as f:
                json.dump(golden, f)
            mine = load_folder(folder).eval()
            with torch.no_grad():
                ml, mused = mine(ids)
                mlr, _ = mine(ids, routing=routing)
            mlp = torch.log_softmax(ml.float(), -1)
            row["logprob_maxdiff"] = (mlp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0] - tgt).abs().max().item()
            row["logsoftmax_maxdiff"] = (mlp - lp).abs().max().item()
            row["replay_maxdiff"] = (torch.log_softmax(mlr.float(), -1) - lp).abs().max().item()
            row["routing_equal"] = f"{int((mused.sort(-1).values == routing).all(-1).sum())}/{routing[..., 0].numel()}"
            pub = os.path.join(out_dir, "published", name)
            save_folder(mine, pub)
            back = hf_load(pub)
            with torch.no_grad():
                row["published_hf_logits_maxdiff"] = (back(ids).logits.float() - logits).abs().max().item()
            from safetensors import safe_open
            orig, new = {}, {}
            for d, acc in ((folder, orig), (pub, new)):
                for fn in os.listdir(d):
                    if fn.endswith(".safetensors"):
                        with safe_open(os.path.join(d, fn), "pt") as f:
                            for k in f.keys():
                                acc[k] = str(f.get_slice(k).get_dtype())
            row["published_same_names_dtypes"] = orig == new
            # Weights changed as by training, published, loaded by transformers: same logits.
            g = torch.Generator().manual_seed(400 + n)
            with torch.no_grad():
                for p in mine.parameters():
                    p.add_(0.02 * torch.randn(p.shape, generator=g))
            pub2 = os.path.join(out_dir, "published", name + "_changed")
            save_folder(mine, pub2)
            mine2 = load_folder(pub2).eval()  # the weights as stored (bf16/f16 rounding included)
            with torch.no_grad():
                want = mine2(ids)[0].float()
                row["changed_published_hf_logits_maxdiff"] = (hf_load(pub2)(ids).logits.float() - want).abs().max().item()
        except Exception as e:
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["s"] = round(time.time() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
