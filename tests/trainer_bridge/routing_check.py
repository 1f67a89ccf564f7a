"""Checks a sample's per-token routing and logprobs against the PyTorch reference model.

  routing_check.py CONFIG.json SAMPLE.json WEIGHTS_V0 WEIGHTS_V1 ...

SAMPLE.json: {"prompt": [...], "completion": [...], "versions": [...], "routing": [...],
"logprobs": [...]}. The engine never re-prefills after a switch: the pass over position p - 1
that produced generated token i runs under the weights of token i's version, attending to KV
entries each computed by the version that ran their own pass. This replays exactly that with the
reference model's KV cache. Each row's pass runs with the sample's recorded routing replayed
(the engine's own computation: its logprob must match), and before that, on the same cache,
with the reference router choosing freely (its experts must equal the recorded ones, except at
near ties where the two implementations' f32 scores order two experts differently). Prints
"rows=N mismatched_rows=M max_logprob_err=E" (E over the replayed passes).
"""
import json
import sys

import torch

from flotilla_trainer.model import ModelConfig, Transformer
from flotilla_trainer.safetensors_io import load_file


def main():
    with open(sys.argv[1]) as f:
        cfg = ModelConfig.from_json(f.read())
    with open(sys.argv[2]) as f:
        s = json.load(f)
    models = []
    for path in sys.argv[3:]:
        m = Transformer(cfg)
        m.import_state(load_file(path))
        m.eval()
        models.append(m)
    ids = torch.tensor([s["prompt"] + s["completion"]])
    width = cfg.n_layers * cfg.top_k
    P = len(s["prompt"])
    mismatched = 0
    max_err = 0.0
    cache = models[0].new_cache()
    with torch.no_grad():
        if P > 1:
            models[s["versions"][0]](ids[:, :P - 1], start_pos=0, cache=cache)
        for i, tok in enumerate(s["completion"]):
            pos = P - 1 + i
            model = models[s["versions"][i]]
            got = s["routing"][i * width:(i + 1) * width]
            saved = [(c["k"], c["v"]) for c in cache]
            _, free = model(ids[:, pos:pos + 1], start_pos=pos, cache=cache)
            for c, (k, v) in zip(cache, saved):
                c["k"], c["v"] = k, v
            if free[0, 0].reshape(-1).tolist() != got:
                mismatched += 1
            recorded = torch.tensor(got, dtype=torch.long).view(1, 1, cfg.n_layers, cfg.top_k)
            logits, _ = model(ids[:, pos:pos + 1], routing=recorded, start_pos=pos, cache=cache)
            lp = torch.log_softmax(logits[0, 0].double(), -1)[tok].item()
            max_err = max(max_err, abs(lp - s["logprobs"][i]))
    print(f"rows={len(s['completion'])} mismatched_rows={mismatched} max_logprob_err={max_err:.5f}")


if __name__ == "__main__":
    main()
