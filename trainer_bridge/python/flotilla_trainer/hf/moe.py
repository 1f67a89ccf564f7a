"""Feed-forward blocks: the dense SwiGLU MLP and the routed MoE with routing capture and replay.

Routers:
  softmax        p = softmax(gate(x)) in float32; experts = top_k(p); weights = p[experts],
                 renormalised to sum 1 when norm_topk (mixtral always).
  sigmoid_group  (deepseek_v3) s = sigmoid(gate(x)); selection uses s + e_score_correction_bias:
                 groups ranked by the sum of their two best biased scores, the best topk_group
                 kept, top_k experts among them; weights = s[experts] (no bias), renormalised when
                 norm_topk, times routed_scaling_factor.
With replay, the given experts replace the selection and the weights are computed the same way
at those experts. A row of -1 (a prompt position the engine did not route) uses the router.
Shared experts: qwen2_moe's one, gated by sigmoid(shared_expert_gate(x)); deepseek_v3's, ungated.
Experts are held as [E, I, H] gate/up and [E, H, I] down tensors (mlp.experts.gate_proj, ...);
checkpoint.py maps them to the per-expert or fused layout of the file.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, hidden, inter, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=bias)
        self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Experts(nn.Module):
    def __init__(self, n, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.empty(n, inter, hidden))
        self.up_proj = nn.Parameter(torch.empty(n, inter, hidden))
        self.down_proj = nn.Parameter(torch.empty(n, hidden, inter))

    def forward(self, x, idx, weights):
        """x [N,H]; idx/weights [N,k]. Sum over the selected experts, in expert order."""
        y = torch.zeros_like(x)
        for e in torch.unique(idx).tolist():
            rows, slot = (idx == e).nonzero(as_tuple=True)
            xe = x[rows]
            h = F.silu(xe @ self.gate_proj[e].t()) * (xe @ self.up_proj[e].t())
            y.index_add_(0, rows, (h @ self.down_proj[e].t()) * weights[rows, slot, None])
        return y


class Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.weight = nn.Parameter(torch.empty(c.n_experts, c.hidden))
        if c.router == "sigmoid_group":
            self.register_buffer("e_score_correction_bias", torch.zeros(c.n_experts))

    def scores(self, x):
        logits = F.linear(x.float(), self.weight.float())
        if self.c.router == "sigmoid_group":
            return logits.sigmoid()
        return torch.softmax(logits, dim=-1)

    def select(self, s):
        c = self.c
        if c.router != "sigmoid_group":
            return s.topk(c.top_k, dim=-1)[1]
        choice = s + self.e_score_correction_bias.float()
        N = s.shape[0]
        per = c.n_experts // c.n_group
        group = choice.view(N, c.n_group, per).topk(min(2, per), dim=-1)[0].sum(-1)
        keep = group.topk(c.topk_group, dim=-1)[1]
        mask = torch.zeros_like(group).scatter_(1, keep, 1.0)
        mask = mask.unsqueeze(-1).expand(N, c.n_group, per).reshape(N, -1)
        choice = choice.masked_fill(mask == 0, 0.0)
        return choice.topk(c.top_k, dim=-1)[1]

    def weights(self, s, idx):
        c = self.c
        w = s.gather(-1, idx)
        if c.router == "sigmoid_group":
            if c.norm_topk:
                w = w / (w.sum(-1, keepdim=True) + 1e-20)
            return w * c.scaling
        if c.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        return w

    def forward(self, x, forced=None):
        s = self.scores(x)
        with torch.no_grad():
            idx = self.select(s)
            if forced is not None:
                forced = forced.long().to(idx.device)
                idx = torch.where((forced >= 0).all(-1, keepdim=True), forced, idx)
        return idx, self.weights(s, idx)


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.gate = Router(c)
        self.experts = Experts(c.n_experts, c.hidden, c.moe_inter)
        if c.shared_inter and c.family == "qwen2_moe":
            self.shared_expert = MLP(c.hidden, c.shared_inter)
            self.shared_expert_gate = nn.Linear(c.hidden, 1, bias=False)
        elif c.shared_inter:
            self.shared_experts = MLP(c.hidden, c.shared_inter)

    def forward(self, x, forced=None):
        """x [B,T,H]; forced [B,T,k] or None. Returns (y [B,T,H], experts [B,T,k])."""
        B, T, H = x.shape
        flat = x.reshape(B * T, H)
        idx, w = self.gate(flat, None if forced is None else forced.reshape(B * T, -1))
        y = self.experts(flat, idx, w.to(x.dtype))
        if hasattr(self, "shared_expert"):
            y = y + torch.sigmoid(self.shared_expert_gate(flat)) * self.shared_expert(flat)
        elif hasattr(self, "shared_experts"):
            y = y + self.shared_experts(flat)
        return y.view(B, T, H), idx.view(B, T, -1)
