"""PyTorch reference of the Flotilla MoE transformer, the same function the C++ engine computes.

Definitions shared with the engine (inference/src/cpu_model.cc):
  RMSNorm      y = x * rsqrt(mean(x^2) + eps) * w
  RoPE         rotate-half form: pairs (i, i + head_dim/2), inv_freq_i = theta^(-2i/head_dim)
  attention    causal, GQA (query head h reads kv head h / (n_heads / n_kv_heads)); a layer in
               sliding_layers sees only keys with q_pos - k_pos < sliding_window
  router       p = softmax(router(x)); experts = top_k(p) (descending); weights = p[experts]
               renormalised to sum 1. With routing replay the given experts replace top_k and
               the weights are p at those experts, renormalised.
  expert       SwiGLU: w2(silu(w1 x) * w3 x); the shared expert(s) are added unweighted.
  block        h = x + attn(attn_norm(x)); out = h + moe(ffn_norm(h))
Interface: model(ids, routing=None) -> (logits [B,T,V], routing_used [B,T,L,k] int64).
"""
import json
import math
from dataclasses import dataclass, field, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab_size: int = 272
    n_layers: int = 4
    d_model: int = 256
    n_heads: int = 4
    n_kv_heads: int = 4
    head_dim: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    n_experts: int = 8
    top_k: int = 2
    n_shared_experts: int = 1
    expert_hidden: int = 256
    max_context: int = 4096
    sliding_window: int = 0
    sliding_layers: list = field(default_factory=list)
    tie_embeddings: bool = False

    @staticmethod
    def from_json(text):
        d = json.loads(text)
        known = set(ModelConfig.__dataclass_fields__)
        return ModelConfig(**{k: v for k, v in d.items() if k in known})

    def to_json(self):
        return json.dumps(asdict(self), indent=1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, positions, theta):
    """x: [B, H, T, hd]; positions: [T] int64."""
    hd = x.shape[-1]
    half = hd // 2
    inv = theta ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / hd)
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).to(x.dtype)
    sin = torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c, layer):
        super().__init__()
        self.c = c
        self.window = c.sliding_window if layer in c.sliding_layers else 0
        self.wq = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=False)

    def forward(self, x, start_pos=0, cache=None):
        c = self.c
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        pos = torch.arange(start_pos, start_pos + T)
        q = rope(q, pos, c.rope_theta)
        k = rope(k, pos, c.rope_theta)
        if cache is not None:
            if cache.get("k") is not None:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        S = k.shape[2]
        rep = c.n_heads // c.n_kv_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        qpos = pos[:, None]
        kpos = torch.arange(S)[None, :] + (start_pos + T - S)
        allowed = kpos <= qpos
        if self.window > 0:
            allowed = allowed & (qpos - kpos < self.window)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(B, T, c.n_heads * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        E, F_, D, S = c.n_experts, c.expert_hidden, c.d_model, c.n_shared_experts
        self.router = nn.Linear(D, E, bias=False)
        self.w1 = nn.Parameter(torch.empty(E, F_, D))
        self.w3 = nn.Parameter(torch.empty(E, F_, D))
        self.w2 = nn.Parameter(torch.empty(E, D, F_))
        self.s1 = nn.Parameter(torch.empty(S, F_, D))
        self.s3 = nn.Parameter(torch.empty(S, F_, D))
        self.s2 = nn.Parameter(torch.empty(S, D, F_))

    def forward(self, x, forced=None):
        """x: [N, D]; forced: [N, k] expert ids or None. Returns (y, experts [N, k])."""
        probs = torch.softmax(self.router(x).float(), dim=-1)
        if forced is None:
            topv, topi = probs.topk(self.c.top_k, dim=-1)
        else:
            topi = forced.long()
            topv = probs.gather(-1, topi)
        w = (topv / topv.sum(-1, keepdim=True)).to(x.dtype)
        y = torch.zeros_like(x)
        for e in range(self.c.n_experts):
            rows, slot = (topi == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            xe = x[rows]
            he = F.silu(xe @ self.w1[e].t()) * (xe @ self.w3[e].t())
            y.index_add_(0, rows, (he @ self.w2[e].t()) * w[rows, slot, None])
        for s in range(self.c.n_shared_experts):
            y = y + (F.silu(x @ self.s1[s].t()) * (x @ self.s3[s].t())) @ self.s2[s].t()
        return y, topi


class Block(nn.Module):
    def __init__(self, c, layer):
        super().__init__()
        self.attn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.attn = Attention(c, layer)
        self.ffn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.moe = MoE(c)

    def forward(self, x, forced, start_pos, cache):
        B, T, D = x.shape
        h = x + self.attn(self.attn_norm(x), start_pos, cache)
        f = None if forced is None else forced.reshape(B * T, -1)
        y, experts = self.moe(self.ffn_norm(h).reshape(B * T, D), f)
        return h + y.view(B, T, D), experts.view(B, T, -1)


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList([Block(c, l) for l in range(c.n_layers)])
        self.norm = RMSNorm(c.d_model, c.norm_eps)
        self.lm_head = None if c.tie_embeddings else nn.Linear(c.d_model, c.vocab_size, bias=False)

    def forward(self, ids, routing=None, start_pos=0, cache=None):
        """ids [B,T] int64; routing [B,T,L,k] to replay, or None to use the router.
        cache: optional list (one dict per layer) for incremental decoding from start_pos."""
        x = self.embed(ids)
        used = []
        for l, layer in enumerate(self.layers):
            forced = None if routing is None else routing[:, :, l, :]
            x, experts = layer(x, forced, start_pos, None if cache is None else cache[l])
            used.append(experts)
        x = self.norm(x)
        logits = x @ self.embed.weight.t() if self.lm_head is None else self.lm_head(x)
        return logits, torch.stack(used, dim=2)

    def routing_shape(self):
        """(MoE layers, experts per token): the shape of one position's routing rows."""
        return self.c.n_layers, self.c.top_k

    def new_cache(self):
        return [dict(k=None, v=None) for _ in range(self.c.n_layers)]

    # Tensor names in the safetensors file (same names the engine expects).
    def export_state(self):
        out = {"embed.weight": self.embed.weight, "norm.weight": self.norm.weight}
        if self.lm_head is not None:
            out["lm_head.weight"] = self.lm_head.weight
        for l, b in enumerate(self.layers):
            p = f"layers.{l}."
            out[p + "attn_norm.weight"] = b.attn_norm.weight
            out[p + "attn.wq"] = b.attn.wq.weight
            out[p + "attn.wk"] = b.attn.wk.weight
            out[p + "attn.wv"] = b.attn.wv.weight
            out[p + "attn.wo"] = b.attn.wo.weight
            out[p + "ffn_norm.weight"] = b.ffn_norm.weight
            out[p + "moe.router"] = b.moe.router.weight
            for n in ("w1", "w2", "w3"):
                out[p + "moe.experts." + n] = getattr(b.moe, n)
                if self.c.n_shared_experts > 0:  # the engine has no shared tensors otherwise
                    out[p + "moe.shared." + n] = getattr(b.moe, "s" + n[1])
        return {k: v.detach() for k, v in out.items()}

    def import_state(self, tensors):
        own = self.export_state()
        missing = sorted(set(own) - set(tensors))
        if missing:
            raise ValueError(f"missing tensors: {missing[:5]}")
        with torch.no_grad():
            for name, dst in own.items():
                src = tensors[name]
                if tuple(src.shape) != tuple(dst.shape):
                    raise ValueError(f"{name}: shape {tuple(src.shape)} != {tuple(dst.shape)}")
                dst.copy_(src.to(dst.dtype))


def init_weights(model, seed=0, std=0.02):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g))
    return model


def load(config_path, weights_path):
    from .safetensors_io import load_file
    with open(config_path) as f:
        c = ModelConfig.from_json(f.read())
    m = Transformer(c)
    m.import_state(load_file(weights_path))
    return m
