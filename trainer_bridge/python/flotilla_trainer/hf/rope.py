"""Rotary position embeddings as Hugging Face checkpoints define them: default, llama3, yarn.

Parameters come from config.json's rope_parameters (transformers 5) or rope_theta + rope_scaling
(earlier files). Frequencies are computed in float32, as the checkpoints' reference code does, so
logits match to float32 rounding. Returns inverse frequencies [dim/2] and the factor that scales
cos and sin (yarn's attention factor; 1 otherwise).
"""
import math

import torch

from .config import ConfigError


def rope_params(cfg):
    """The merged rope dict of cfg (rope_theta and rope_type always present)."""
    rp = cfg.get("rope_parameters") or {}
    if rp and all(isinstance(v, dict) for v in rp.values()):
        rp = rp.get("full_attention") or next(iter(rp.values()))
    out = dict(cfg.get("rope_scaling") or {})
    out.update(rp)
    out.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    out["rope_type"] = out.get("rope_type", out.get("type", "default"))
    return out


def _yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _default(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _llama3(cfg, rp, base, dim):
    inv = _default(base, dim)
    try:
        factor = rp["factor"]
        low = rp["low_freq_factor"]
        high = rp["high_freq_factor"]
        old = rp["original_max_position_embeddings"]
    except KeyError as e:
        raise ConfigError(f"{cfg.source}: rope_parameters.{e.args[0]}: missing for rope_type llama3")
    low_wavelen = old / low
    high_wavelen = old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def _yarn(cfg, rp, base, dim):
    if "factor" not in rp:
        raise ConfigError(f"{cfg.source}: rope_parameters.factor: missing for rope_type yarn")
    factor = rp["factor"]
    orig = rp.get("original_max_position_embeddings") or cfg.max_positions
    if rp.get("original_max_position_embeddings"):
        factor = cfg.max_positions / orig
    attn = rp.get("attention_factor")
    mscale, mscale_all = rp.get("mscale"), rp.get("mscale_all_dim")
    if attn is None:
        if mscale and mscale_all:
            attn = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
        else:
            attn = _yarn_mscale(factor)
    beta_fast = rp.get("beta_fast") or 32
    beta_slow = rp.get("beta_slow") or 1

    def corr(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = corr(beta_fast), corr(beta_slow)
    if rp.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extra = 1.0 / pos_freqs
    inter = 1.0 / (factor * pos_freqs)
    keep = 1 - ramp.float()
    return inter * (1 - keep) + extra * keep, float(attn)


def inv_freq(cfg, dim):
    """Inverse frequencies [dim/2] (float32) and the cos/sin scale for a rotary dim of dim."""
    rp = rope_params(cfg)
    base = float(rp["rope_theta"])
    kind = rp["rope_type"]
    if kind == "default":
        return _default(base, dim), 1.0
    if kind == "llama3":
        return _llama3(cfg, rp, base, dim)
    if kind == "yarn":
        return _yarn(cfg, rp, base, dim)
    raise ConfigError(f"{cfg.source}: rope_parameters.rope_type: {kind!r} is not supported "
                      "(default, llama3, yarn)")


def rotary_dim(cfg):
    rp = rope_params(cfg)
    partial = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    return int(cfg.head_dim * partial)


def cos_sin(inv, scale, positions, dtype):
    """cos, sin [T, dim] for positions [T] (rotate-half layout: frequencies repeated twice)."""
    freqs = positions.float()[:, None] * inv[None, :].to(positions.device)
    emb = torch.cat([freqs, freqs], dim=-1)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply(x, cos, sin):
    """x [B, H, T, dim]; cos/sin [T, dim]."""
    return x * cos + rotate_half(x) * sin


def deinterleave(x):
    """Pairs (2i, 2i+1) to halves (i, i + dim/2): DeepSeek-V3's rope_interleave layout."""
    b, h, t, d = x.shape
    return x.view(b, h, t, d // 2, 2).transpose(4, 3).reshape(b, h, t, d)
