"""Checks a sample's per-token routing and logprobs against the PyTorch reference model.

  routing_check.py CONFIG.json SAMPLE.json WEIGHTS_V0 WEIGHTS_V1 ...

SAMPLE.json: {"prompt": [...], "completion": [...], "versions": [...], "routing": [...],
"logprobs": [...]}. The engine never re-prefills after a switch: the pass over position p - 1
that produced generated token i runs under the weights of token i's version, attending to KV
entries each computed by the version that ran their own pass. This replays exactly that with the
reference model's KV cache and compares every routing row and logprob. Prints
"rows=N mismatched_rows=M max_logprob_err=E".
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
            logits, used = models[s["versions"][i]](ids[:, pos:pos + 1], start_pos=pos, cache=cache)
            want = used[0, 0].reshape(-1).tolist()
            got = s["routing"][i * width:(i + 1) * width]
            if want != got:
                mismatched += 1
            lp = torch.log_softmax(logits[0, 0].double(), -1)[tok].item()
            max_err = max(max_err, abs(lp - s["logprobs"][i]))
    print(f"rows={len(s['completion'])} mismatched_rows={mismatched} max_logprob_err={max_err:.5f}")


if __name__ == "__main__":
    main()
