"""Causal LM for Hugging Face checkpoint folders, with the interface of flotilla_trainer.model:

  model(ids, routing=None) -> (logits [B,T,V], routing_used [B,T,L,k] int64)

where L counts the MoE layers (model.routing_layers, in layer order; 0 for a dense model) and
k = model.top_k. routing replays the given experts per token and MoE layer (-1 rows: routed
by the model). Block: h = x + attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).
Parameter names are the checkpoint's tensor names (model.layers.N.self_attn.q_proj.weight, ...),
except the experts, which checkpoint.py maps to the file's layout.
"""
import torch
import torch.nn as nn

from .attention import Attention, MLAttention, RMSNorm
from .moe import MLP, MoE


class DecoderLayer(nn.Module):
    def __init__(self, c, i, bias):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        attn_bias = lambda name: bias(f"model.layers.{i}.self_attn.{name}.bias")  # noqa: E731
        self.self_attn = MLAttention(c, i, attn_bias) if c.family == "deepseek_v3" else Attention(c, i, attn_bias)
        self.is_moe = c.is_moe_layer(i)
        if self.is_moe:
            self.mlp = MoE(c)
        else:
            self.mlp = MLP(c.hidden, c.dense_inter, bias(f"model.layers.{i}.mlp.gate_proj.bias"))

    def forward(self, x, forced):
        h = x + self.self_attn(self.input_layernorm(x))
        if self.is_moe:
            y, experts = self.mlp(self.post_attention_layernorm(h), forced)
            return h + y, experts
        return h + self.mlp(self.post_attention_layernorm(h)), None


class Body(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden)
        self.layers = nn.ModuleList([DecoderLayer(c, i, bias) for i in range(c.n_layers)])
        self.norm = RMSNorm(c.hidden, c.eps)


def default_biases(c):
    """Which bias tensors a family has by its config (used when no checkpoint says otherwise)."""
    names = set()
    f = c.family
    attn = []
    if f in ("llama", "qwen3", "qwen3_moe", "olmoe") and c.get("attention_bias", False):
        attn = ["q_proj", "k_proj", "v_proj", "o_proj"]
    elif f == "qwen2_moe" and c.get("qkv_bias", True):
        attn = ["q_proj", "k_proj", "v_proj"]
    elif f == "deepseek_v3" and c.get("attention_bias", False):
        attn = ["q_a_proj", "kv_a_proj_with_mqa", "o_proj"]
    for i in range(c.n_layers):
        names.update(f"model.layers.{i}.self_attn.{a}.bias" for a in attn)
        if f == "llama" and c.get("mlp_bias", False):
            names.add(f"model.layers.{i}.mlp.gate_proj.bias")
    return names


class HFCausalLM(nn.Module):
    def __init__(self, c, bias_names=None):
        """bias_names: the bias tensors present (from the checkpoint); None: the config's defaults."""
        super().__init__()
        self.c = c
        present = default_biases(c) if bias_names is None else set(bias_names)
        self.model = Body(c, lambda name: name in present)
        self.lm_head = None if c.tie else nn.Linear(c.hidden, c.vocab_size, bias=False)
        self.routing_layers = [i for i in range(c.n_layers) if c.is_moe_layer(i)]
        self.top_k = c.top_k
        self.layout = None  # set by checkpoint.load_folder: how tensors are named in the file

    def routing_shape(self):
        return len(self.routing_layers), max(1, self.top_k)

    def forward(self, ids, routing=None):
        x = self.model.embed_tokens(ids)
        used = []
        for layer in self.model.layers:
            forced = None
            if layer.is_moe and routing is not None and routing.shape[2] > len(used):
                forced = routing[:, :, len(used), :]
            x, experts = layer(x, forced)
            if experts is not None:
                used.append(experts)
        x = self.model.norm(x)
        logits = x @ self.model.embed_tokens.weight.t() if self.lm_head is None else self.lm_head(x)
        B, T = ids.shape
        if used:
            return logits, torch.stack(used, dim=2)
        return logits, torch.zeros(B, T, 0, max(1, self.top_k), dtype=torch.long, device=ids.device)


def init_weights(model, seed=0, std=0.02):
    """Random init: norms near 1, biases and the routing correction bias near 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(list(model.named_parameters()) + list(model.named_buffers())):
            if name.endswith("inv_freq"):
                continue
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g))
    return model
