"""A straightforward PyTorch reference for `flotilla merge`, used by tests/merge/merge_reference_test.cc.

Usage: reference_merge.py JOBS.json. Each job: {method, base (file or null), models: [{path, weight,
density}], t, lambda, normalize, seed, out}. Every path is one .safetensors file; each job writes its
merge to `out` as float32.

It computes each method the plain way, per tensor (per expert slice for stacked expert tensors),
with deltas formed in float32 and everything else in float64, and reproduces DARE's documented
counter-based drop mask (merge/src/dare_mask.h) in numpy.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))
from flotilla_trainer.safetensors_io import load_file, save_file  # noqa: E402

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64_int(z):
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64_np(z):
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def dare_keep(seed, name, model_index, offset, n, density):
    key = mix64_int(seed ^ mix64_int(fnv1a64(name) ^ (((model_index + 1) * GOLDEN) & M64)))
    idx = np.arange(offset, offset + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = mix64_np(np.uint64(key) + idx * np.uint64(GOLDEN))
    threshold = np.uint64(int(math.ldexp(density, 53)))
    return torch.from_numpy((h >> np.uint64(11)) < threshold)


def per_expert(name, shape):
    return len(shape) == 3 and ("mlp.experts." in name or "moe.experts." in name or "moe.shared." in name)


def trim(d, density):
    n = d.numel()
    k = int(density * n)
    if k >= n:
        return d
    keep = torch.zeros(n, dtype=torch.bool)
    if k > 0:
        order = torch.sort(d.abs(), descending=True, stable=True).indices
        keep[order[:k]] = True
    return torch.where(keep, d, torch.zeros_like(d))


def merge_unit(job, name, base, models, offset):
    method = job["method"]
    ws = [m["weight"] for m in job["models"]]
    if method == "linear":
        s = sum(w * m.double() for w, m in zip(ws, models))
        return s / sum(ws) if job["normalize"] else s
    if method == "slerp":
        a, b, t = base.double(), models[0].double(), job["t"]
        na, nb = a.norm(), b.norm()
        s0, s1 = 1 - t, t
        if na > 1e-8 and nb > 1e-8:
            cos = float((a / na) @ (b / nb))
            if abs(cos) <= 0.9995:
                theta = math.acos(cos)
                s0 = math.sin((1 - t) * theta) / math.sin(theta)
                s1 = math.sin(t * theta) / math.sin(theta)
        return s0 * a + s1 * b
    deltas = [m - base for m in models]  # float32, as the merge forms them
    if method == "model_stock":
        k = len(deltas)
        norms = [d.double().norm() for d in deltas]
        t = 0.0
        if all(n >= 1e-8 for n in norms):
            cos = [float(deltas[i].double() @ deltas[j].double() / (norms[i] * norms[j]))
                   for i in range(k) for j in range(i + 1, k)]
            c = sum(cos) / len(cos)
            denom = 1 + (k - 1) * c
            t = 0.0 if abs(denom) < 1e-8 else k * c / denom
        avg = sum(m.double() for m in models) / k
        return t * avg + (1 - t) * base.double()
    if method == "ties":
        deltas = [trim(d, m["density"]) for d, m in zip(deltas, job["models"])]
    if method in ("dare_linear", "dare_ties"):
        deltas = [torch.where(dare_keep(job["seed"], name, i, offset, d.numel(), m["density"]),
                              (d.double() * (1.0 / m["density"])).float(), torch.zeros_like(d))
                  for i, (d, m) in enumerate(zip(deltas, job["models"]))]
    wd = torch.stack([w * d.double() for w, d in zip(ws, deltas)])
    if method in ("ties", "dare_ties"):
        majority = torch.where(wd.sum(0) >= 0, 1.0, -1.0).double()
        agree = torch.sign(wd) == majority
        mixed = (wd * agree).sum(0)
        if job["normalize"]:
            div = (torch.tensor(ws, dtype=torch.float64)[:, None] * agree).sum(0)
            mixed = mixed / torch.where(div.abs() < 1e-8, torch.ones_like(div), div)
    else:
        mixed = wd.sum(0)
        if job["normalize"]:
            mixed = mixed / sum(ws)
    return base.double() + job["lambda"] * mixed


def run(job):
    base = load_file(job["base"]) if job.get("base") else None
    models = [load_file(m["path"]) for m in job["models"]]
    ref = base if base is not None else models[0]
    out = {}
    for name, t in ref.items():
        shape = list(t.shape)
        slices = shape[0] if per_expert(name, shape) else 1
        flat_b = t.float().reshape(slices, -1) if base is not None else None
        flat_m = [m[name].float().reshape(slices, -1) for m in models]
        parts = []
        unit = t.numel() // slices
        for u in range(slices):
            parts.append(merge_unit(job, name, None if flat_b is None else flat_b[u], [m[u] for m in flat_m],
                                    u * unit).float())
        out[name] = torch.stack(parts).reshape(shape)
    save_file(out, job["out"])


def main():
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    for job in jobs:
        run(job)
    print(f"reference: {len(jobs)} merges")


if __name__ == "__main__":
    main()
