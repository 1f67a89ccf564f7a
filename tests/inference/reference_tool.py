"""Reference outputs from the PyTorch model for the engine's tests.

  reference_tool.py init  CONFIG_JSON OUT_SAFETENSORS SEED STD
  reference_tool.py score CONFIG_JSON WEIGHTS TOKENS_CSV[;TOKENS_CSV...]  -> JSON list on stdout,
      one {"logprobs": [[V floats] per position], "experts": [[L*k ints] per position]} each
  reference_tool.py render -> token ids of a fixed conversation (template cross-check)
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))
import torch  # noqa: E402

from flotilla_trainer.model import ModelConfig, Transformer, init_weights, load  # noqa: E402
from flotilla_trainer.safetensors_io import save_file  # noqa: E402
from flotilla_trainer import tokenizer  # noqa: E402


def main():
    torch.set_num_threads(1)
    cmd = sys.argv[1]
    if cmd == "init":
        with open(sys.argv[2]) as f:
            c = ModelConfig.from_json(f.read())
        m = init_weights(Transformer(c), seed=int(sys.argv[4]), std=float(sys.argv[5]))
        save_file(m.export_state(), sys.argv[3])
    elif cmd == "score":
        m = load(sys.argv[2], sys.argv[3])
        out = []
        for seq in sys.argv[4].split(";"):
            ids = torch.tensor([[int(t) for t in seq.split(",")]])
            with torch.no_grad():
                logits, used = m(ids)
            lp = torch.log_softmax(logits[0].double(), dim=-1)
            out.append({"logprobs": lp.tolist(), "experts": used[0].reshape(ids.shape[1], -1).tolist()})
        json.dump(out, sys.stdout)
    elif cmd == "render":
        msgs = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi \u00e9"},
            {"role": "assistant", "content": "ok", "tool_calls": [{"name": "ls", "arguments": "{\"path\":\"/\"}"}]},
            {"role": "tool", "content": "a b"},
        ]
        print(",".join(str(i) for i in tokenizer.render_conversation(msgs, True)))


if __name__ == "__main__":
    main()
