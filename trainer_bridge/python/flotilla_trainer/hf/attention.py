"""Attention of the Hugging Face families: grouped-query attention (llama, qwen3, qwen3_moe,
qwen2_moe, mixtral, olmoe) and DeepSeek-V3's multi-head latent attention.

Module and parameter names are the checkpoint's (self_attn.q_proj, q_norm, kv_a_proj_with_mqa,
...), so a state_dict key is the tensor's name in model.safetensors.
"""
import math

import torch
import torch.nn as nn

from . import rope
from .config import ConfigError


class RMSNorm(nn.Module):
    """y = w * (x * rsqrt(mean(x^2) + eps)), the mean taken in float32."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def causal_attention(q, k, v, scale, window):
    """q [B,H,T,d], k/v [B,Hkv,T,d]; causal (and sliding-window when window > 0)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    T = q.shape[2]
    pos = torch.arange(T, device=q.device)
    allowed = pos[None, :] <= pos[:, None]
    if window > 0:
        allowed = allowed & (pos[:, None] - pos[None, :] < window)
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return (probs @ v).transpose(1, 2)


class Attention(nn.Module):
    """GQA with optional biases and q/k RMSNorm: per head (qwen3) or over the projection (olmoe)."""

    def __init__(self, c, layer, bias):
        super().__init__()
        self.c = c
        d, H, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        self.q_proj = nn.Linear(c.hidden, H * d, bias=bias("q_proj"))
        self.k_proj = nn.Linear(c.hidden, Hkv * d, bias=bias("k_proj"))
        self.v_proj = nn.Linear(c.hidden, Hkv * d, bias=bias("v_proj"))
        self.o_proj = nn.Linear(H * d, c.hidden, bias=bias("o_proj"))
        self.qk_norm = None
        if c.family in ("qwen3", "qwen3_moe"):
            self.qk_norm = "head"
            self.q_norm = RMSNorm(d, c.eps)
            self.k_norm = RMSNorm(d, c.eps)
        elif c.family == "olmoe":
            self.qk_norm = "full"
            self.q_norm = RMSNorm(H * d, c.eps)
            self.k_norm = RMSNorm(Hkv * d, c.eps)
        self.clip = c.get("clip_qkv") if c.family == "olmoe" else None
        rp = rope.rope_params(c)
        if rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)) != 1.0:
            raise ConfigError(f"{c.source}: partial_rotary_factor: only 1.0 is supported for {c.family}")
        inv, self.rope_scale = rope.inv_freq(c, d)
        self.register_buffer("inv_freq", inv, persistent=False)
        self.window = c.window(layer)
        self.scale = d ** -0.5

    def forward(self, x):
        c = self.c
        B, T, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.clip:
            q, k, v = (t.clamp(-self.clip, self.clip) for t in (q, k, v))
        q = q.view(B, T, -1, c.head_dim)
        k = k.view(B, T, -1, c.head_dim)
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(B, T, -1, c.head_dim).transpose(1, 2)
        cos, sin = rope.cos_sin(self.inv_freq, self.rope_scale, torch.arange(T, device=x.device), x.dtype)
        q, k = rope.apply(q, cos, sin), rope.apply(k, cos, sin)
        out = causal_attention(q, k, v, self.scale, self.window)
        return self.o_proj(out.reshape(B, T, -1))


class MLAttention(nn.Module):
    """DeepSeek-V3 MLA: q through an optional low-rank path (q_a_proj, q_a_layernorm, q_b_proj),
    keys and values from a compressed latent (kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj);
    the rope part of the key is one head shared by all heads."""

    def __init__(self, c, layer, bias):
        super().__init__()
        self.c = c
        H = c.n_heads
        self.qk_dim = c.qk_nope + c.qk_rope
        if c.q_lora_rank:
            self.q_a_proj = nn.Linear(c.hidden, c.q_lora_rank, bias=bias("q_a_proj"))
            self.q_a_layernorm = RMSNorm(c.q_lora_rank, c.eps)
            self.q_b_proj = nn.Linear(c.q_lora_rank, H * self.qk_dim, bias=bias("q_b_proj"))
        else:
            self.q_proj = nn.Linear(c.hidden, H * self.qk_dim, bias=bias("q_proj"))
        self.kv_a_proj_with_mqa = nn.Linear(c.hidden, c.kv_lora_rank + c.qk_rope, bias=bias("kv_a_proj_with_mqa"))
        self.kv_a_layernorm = RMSNorm(c.kv_lora_rank, c.eps)
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, H * (c.qk_nope + c.v_head_dim), bias=bias("kv_b_proj"))
        self.o_proj = nn.Linear(H * c.v_head_dim, c.hidden, bias=bias("o_proj"))
        inv, self.rope_scale = rope.inv_freq(c, c.qk_rope)
        self.register_buffer("inv_freq", inv, persistent=False)
        self.scale = self.qk_dim ** -0.5
        rp = rope.rope_params(c)
        if rp["rope_type"] != "default" and rp.get("mscale_all_dim"):
            m = 0.1 * rp["mscale_all_dim"] * math.log(rp["factor"]) + 1.0 if rp["factor"] > 1 else 1.0
            self.scale *= m * m

    def forward(self, x):
        c = self.c
        B, T, _ = x.shape
        if c.q_lora_rank:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        else:
            q = self.q_proj(x)
        q = q.view(B, T, -1, self.qk_dim).transpose(1, 2)
        q_pass, q_rot = q.split([c.qk_nope, c.qk_rope], dim=-1)
        kv = self.kv_a_proj_with_mqa(x)
        k_pass, k_rot = kv.split([c.kv_lora_rank, c.qk_rope], dim=-1)
        k_pass = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(B, T, -1, c.qk_nope + c.v_head_dim)
        k_pass, v = k_pass.transpose(1, 2).split([c.qk_nope, c.v_head_dim], dim=-1)
        k_rot = k_rot.view(B, 1, T, c.qk_rope)
        if c.rope_interleave:
            q_rot, k_rot = rope.deinterleave(q_rot), rope.deinterleave(k_rot)
        cos, sin = rope.cos_sin(self.inv_freq, self.rope_scale, torch.arange(T, device=x.device), x.dtype)
        q_rot, k_rot = rope.apply(q_rot, cos, sin), rope.apply(k_rot, cos, sin)
        k_rot = k_rot.expand(-1, k_pass.shape[1], -1, -1)
        q = torch.cat([q_pass, q_rot], dim=-1)
        k = torch.cat([k_pass, k_rot], dim=-1)
        out = causal_attention(q, k, v, self.scale, 0)
        return self.o_proj(out.reshape(B, T, -1))
