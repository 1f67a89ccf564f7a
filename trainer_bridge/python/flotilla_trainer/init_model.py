"""Writes a random-init model: <out>.safetensors and <out>.json (the engine's config JSON).

  python3 -m flotilla_trainer.init_model --out /tmp/m [--config cfg.json] [--seed 0] [--std 0.02]
"""
import argparse

import torch

from .model import ModelConfig, Transformer, init_weights
from .safetensors_io import save_file


def write_model(out_prefix, config, seed=0, std=0.02, dtype=torch.float32):
    model = init_weights(Transformer(config), seed=seed, std=std)
    state = {k: v.to(dtype) for k, v in model.export_state().items()}
    save_file(state, out_prefix + ".safetensors", metadata={"format": "flotilla"})
    with open(out_prefix + ".json", "w") as f:
        f.write(config.to_json())
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--config")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    c = ModelConfig()
    if a.config:
        with open(a.config) as f:
            c = ModelConfig.from_json(f.read())
    write_model(a.out, c, a.seed, a.std, torch.bfloat16 if a.bf16 else torch.float32)


if __name__ == "__main__":
    main()
