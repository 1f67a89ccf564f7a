"""Turns a TrainerBridge Batch into padded tensors, and SFT examples into the same layout.

Layout per sample (as the bridge sends it): ids = prompt + generated; loss_mask 1 on generated
tokens still within the off-policy bound; behaviour logprobs and policy versions per position
(-1 on context tokens: prompt, tool output, scaffold text);
routing: routing_width ids per position, -1 rows on the prompt (routed by the trainer) and the
engine's rows, concatenated across checkpoint segments, on generated tokens. The engine's row
for token t is the routing of the pass over position t - 1, which is where the trainer reads
the logits that score token t, so rows shift left by one.
"""
import torch

from .tokenizer import PAD


class Tensors:
    """ids/targets [B,T]; mask, behaviour, advantage [B,T] float; routing [B,T,L,k] or None;
    versions [B,T] long (the policy version of each target token, -1 on context) or None."""

    def __init__(self, ids, targets, mask, behaviour, advantage, routing, teacher=None, versions=None):
        self.ids, self.targets, self.mask = ids, targets, mask
        self.behaviour, self.advantage, self.routing = behaviour, advantage, routing
        self.teacher = teacher  # dict: full [B,T,V] or (top_ids [B,T,k], top_lp [B,T,k])
        self.versions = versions

    def to(self, device):
        for name in ("ids", "targets", "mask", "behaviour", "advantage", "routing", "versions"):
            v = getattr(self, name)
            if v is not None:
                setattr(self, name, v.to(device))
        if self.teacher is not None:
            self.teacher = {k: v.to(device) for k, v in self.teacher.items()}
        return self


def from_batch(batch, n_layers, top_k):
    """Inputs are ids[:-1], targets ids[1:]; position j of the inputs predicts token j + 1."""
    samples = list(batch.samples)
    # At least one position: a batch whose samples carry no tokens (an agent that never reached
    # the engine) is all padding with no loss token, a step that changes nothing.
    T = max(1, max(len(s.ids) for s in samples) - 1)
    B = len(samples)
    ids = torch.full((B, T), PAD, dtype=torch.long)
    targets = torch.full((B, T), PAD, dtype=torch.long)
    mask = torch.zeros(B, T)
    behaviour = torch.zeros(B, T)
    advantage = torch.zeros(B, T)
    routing = torch.full((B, T, n_layers, top_k), -1, dtype=torch.long)
    versions = torch.full((B, T), -1, dtype=torch.long)
    teacher_full = teacher_ids = teacher_lp = None
    width = max((s.teacher_width for s in samples), default=0)
    has_teacher = width > 0 and any(len(s.teacher_logprobs) for s in samples)
    if has_teacher:
        full = all(len(s.teacher_ids) == 0 for s in samples if len(s.teacher_logprobs))
        if full:
            teacher_full = torch.zeros(B, T, width)
        else:
            teacher_ids = torch.zeros(B, T, width, dtype=torch.long)
            teacher_lp = torch.full((B, T, width), -1e9)
    for b, s in enumerate(samples):
        n = len(s.ids)
        seq = torch.tensor(list(s.ids), dtype=torch.long)
        ids[b, :n - 1] = seq[:-1]
        targets[b, :n - 1] = seq[1:]
        mask[b, :n - 1] = torch.tensor(list(s.loss_mask)[1:], dtype=torch.float32)
        behaviour[b, :n - 1] = torch.tensor(list(s.behaviour_logprobs)[1:])
        advantage[b, :n - 1] = s.advantage
        versions[b, :n - 1] = torch.tensor(list(s.policy_versions)[1:], dtype=torch.long)
        w = s.routing_width
        if w and len(s.routing) == n * w:
            r = torch.tensor(list(s.routing), dtype=torch.long).view(n, n_layers, top_k)
            routing[b, :n - 1] = r[1:]
        if has_teacher and len(s.teacher_logprobs):
            first = next(i for i, v in enumerate(s.policy_versions) if v >= 0)
            gen = n - first
            lp = torch.tensor(list(s.teacher_logprobs)).view(gen, s.teacher_width)
            if teacher_full is not None:
                teacher_full[b, first - 1:n - 1] = lp
            else:
                teacher_ids[b, first - 1:n - 1] = torch.tensor(list(s.teacher_ids), dtype=torch.long).view(gen, s.teacher_width)
                teacher_lp[b, first - 1:n - 1] = lp
    teacher = None
    if teacher_full is not None:
        teacher = {"full": teacher_full}
    elif teacher_ids is not None:
        teacher = {"top_ids": teacher_ids, "top_lp": teacher_lp}
    return Tensors(ids, targets, mask, behaviour, advantage, routing, teacher, versions)


def from_examples(examples):
    """SFT: prompt + target; the loss covers the target tokens."""
    seqs = [(list(e.prompt), list(e.target)) for e in examples]
    T = max(len(p) + len(t) for p, t in seqs) - 1
    B = len(seqs)
    ids = torch.full((B, T), PAD, dtype=torch.long)
    targets = torch.full((B, T), PAD, dtype=torch.long)
    mask = torch.zeros(B, T)
    for b, (p, t) in enumerate(seqs):
        full = torch.tensor(p + t, dtype=torch.long)
        n = len(full)
        ids[b, :n - 1] = full[:-1]
        targets[b, :n - 1] = full[1:]
        mask[b, len(p) - 1:n - 1] = 1.0
    z = torch.zeros(B, T)
    return Tensors(ids, targets, mask, z, z, None)
