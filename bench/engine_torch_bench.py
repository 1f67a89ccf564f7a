"""PyTorch-eager figures of the reference model, for `flotilla bench engine`.

  engine_torch_bench.py CONFIG_JSON WEIGHTS PROMPT_LEN NEW_TOKENS BATCH... [--prefill N] -> name=value lines
Decoding uses the reference's KV cache (model(ids, start_pos=, cache=)), 2 threads.
--prefill N also times one forward over an N-token prompt (batch 1) at its best of three runs:
torch.prefill_tps_ctxN.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))
import torch  # noqa: E402

from flotilla_trainer.model import load  # noqa: E402


def main():
    torch.set_num_threads(2)
    args = sys.argv[1:]
    prefill = 0
    if "--prefill" in args:
        at = args.index("--prefill")
        prefill = int(args[at + 1])
        del args[at:at + 2]
    model = load(args[0], args[1]).eval()
    prompt_len, new_tokens = int(args[2]), int(args[3])
    g = torch.Generator().manual_seed(0)
    for batch in [int(b) for b in args[4:]]:
        ids = torch.randint(0, 256, (batch, prompt_len), generator=g)
        cache = model.new_cache()
        with torch.inference_mode():
            logits, _ = model(ids, start_pos=0, cache=cache)
            nxt = torch.multinomial(torch.softmax(logits[:, -1], -1), 1, generator=g)
            t0 = time.perf_counter()
            for step in range(new_tokens - 1):
                logits, _ = model(nxt, start_pos=prompt_len + step, cache=cache)
                nxt = torch.multinomial(torch.softmax(logits[:, -1], -1), 1, generator=g)
            dt = time.perf_counter() - t0
        print(f"torch.decode_tps_b{batch}={batch * (new_tokens - 1) / dt:.1f}", flush=True)
    if prefill > 0:
        best = float("inf")
        for _ in range(3):
            ids = torch.randint(0, 256, (1, prefill), generator=g)
            with torch.inference_mode():
                t0 = time.perf_counter()
                model(ids)
                best = min(best, time.perf_counter() - t0)
        print(f"torch.prefill_tps_ctx{prefill}={prefill / best:.1f}", flush=True)


if __name__ == "__main__":
    main()
