"""CPU seconds per trainer step of the agentic example (examples/agentic-grpo) on its shapes:
the SFT warm start's batch (32 reference episodes of the mini scaffold, 2 turns each) given per
turn (64 sequences) or packed per episode (batching.pack_examples: 32 sequences, the same loss),
and a GRPO step on a batch of 32 sampled episodes. Process CPU time, one thread, so the figures
hold on a machine other jobs share; the median of --reps steps.

  /usr/bin/python3 bench/trainer_step_bench.py [--reps N] [--episode TOKENS] -> name=value lines
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))
import torch  # noqa: E402

from flotilla_trainer import models  # noqa: E402
from flotilla_trainer.batching import Tensors, from_examples  # noqa: E402
from flotilla_trainer.losses import sft_loss, token_logprobs  # noqa: E402
from flotilla_trainer.model import ModelConfig, Transformer, init_weights  # noqa: E402
from flotilla_trainer.ppo import ppo_step  # noqa: E402
from flotilla_trainer.tokenizer import PAD, render_conversation, render_message  # noqa: E402

# The example's model and scaffold texts (examples/agentic-grpo/experiment.yaml).
MODEL = dict(vocab_size=272, n_layers=2, d_model=64, n_heads=2, n_kv_heads=2, head_dim=32, n_experts=4,
             top_k=2, n_shared_experts=1, expert_hidden=64, max_context=512)
SYSTEM = "Reply with one ```bash block per turn."


class Example:
    def __init__(self, prompt, target):
        self.prompt, self.target = prompt, target


def episode(v):
    """The mini scaffold's reference conversation of a builtin:lookup task (files=1)."""
    return [dict(role="system", content=SYSTEM),
            dict(role="user", content="Write the number in /app/data/a.txt to /app/answer.txt."),
            dict(role="assistant", content="```bash\ncat /app/data/a.txt\n```"),
            dict(role="user", content=f"<returncode>0</returncode>\n<output>\n{v}\n</output>"),
            dict(role="assistant",
                 content=f"```bash\necho {v} > /app/answer.txt && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")]


def turn_examples(episodes):
    out = []
    for c in episodes:
        for i in (2, 4):
            out.append(Example(render_conversation(c[:i]), render_message(c[i])[1:]))
    return out


def cpu_per_step(step, reps):
    step()  # warm-up
    times = []
    for _ in range(reps):
        t = time.process_time()
        step()
        times.append(time.process_time() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--episode", type=int, default=0, help="GRPO sample length (default: the reference episode's)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = init_weights(Transformer(ModelConfig(**MODEL)), seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    examples = turn_examples([episode(v % 10) for v in range(32)])

    def sft(packed):
        def step():
            t = from_examples(examples) if packed else per_turn()
            loss, _ = sft_loss(model(t.ids)[0], t.targets, t.mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return step

    def per_turn():  # the layout before packing: one padded row per example
        T = max(len(e.prompt) + len(e.target) for e in examples) - 1
        ids = torch.full((len(examples), T), PAD, dtype=torch.long)
        targets = torch.full((len(examples), T), PAD, dtype=torch.long)
        mask = torch.zeros(len(examples), T)
        for b, e in enumerate(examples):
            full = torch.tensor(e.prompt + e.target)
            n = len(full)
            ids[b, :n - 1], targets[b, :n - 1] = full[:-1], full[1:]
            mask[b, len(e.prompt) - 1:n - 1] = 1.0
        return Tensors(ids, targets, mask, None, None, None)

    packed_rows = from_examples(examples)
    print(f"trainer.sft_rows_per_turn={len(examples)}")
    print(f"trainer.sft_rows_packed={packed_rows.ids.shape[0]}")
    print(f"trainer.sft_tokens_packed={packed_rows.ids.shape[0] * packed_rows.ids.shape[1]}")
    print(f"trainer.sft_step_cpu_s_per_turn={cpu_per_step(sft(False), a.reps):.3f}")
    print(f"trainer.sft_step_cpu_s_packed={cpu_per_step(sft(True), a.reps):.3f}")

    # GRPO: 32 samples (4 groups of 8), the generated tokens' routing replayed.
    T = (a.episode or len(packed_rows.ids[0]) + 1) - 1
    g = torch.Generator().manual_seed(0)
    B, L, k = 32, MODEL["n_layers"], MODEL["top_k"]
    ids = torch.randint(0, 256, (B, T), generator=g)
    targets = torch.randint(0, 256, (B, T), generator=g)
    mask = torch.zeros(B, T)
    mask[:, T // 3:] = 1.0
    routing = torch.full((B, T, L, k), -1, dtype=torch.long)
    routing[:, T // 3:] = torch.stack([torch.randperm(MODEL["n_experts"], generator=g)[:k] for _ in range(B * L)]).view(B, 1, L, k)
    t = Tensors(ids, targets, mask, torch.full((B, T), -2.0), torch.randn(B, T, generator=g), routing,
                versions=torch.zeros(B, T, dtype=torch.long))
    params = list(model.parameters())

    def grpo():
        ppo_step(lambda mb: token_logprobs(models.forward_replay(model, mb.ids, mb.routing), mb.targets),
                 params, opt, t, 0)
    print(f"trainer.grpo_tokens={B * T}")
    print(f"trainer.grpo_step_cpu_s={cpu_per_step(grpo, a.reps):.3f}")


if __name__ == "__main__":
    main()
