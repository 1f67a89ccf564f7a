"""The Flotilla trainer: SFT warm start, then asynchronous GRPO (or on-policy distillation)
against a running TrainerBridge, publishing weights to the engine every N steps. A GRPO step is
--ppo-epochs x --minibatches decoupled-PPO updates on the bridge's batch (flotilla_trainer.ppo).

  /usr/bin/python3 -m flotilla_trainer.train --bridge 127.0.0.1:PORT --out DIR [options]

Runs on CUDA when there is a GPU (--device auto), on CPU otherwise.
"""
import argparse
import copy
import os
import sys
import time

import torch

from .batching import from_batch, from_examples
from .client import BridgeClient
from . import models
from .losses import opd_loss, sft_loss, token_logprobs
from .ppo import ppo_step
from .safetensors_io import save_file


def log(msg):
    print(f"trainer: {msg}", file=sys.stderr, flush=True)


def sft(model, opt, client, steps, batch, seed, device, dataset="", tag="sft"):
    t0 = time.time()
    for step in range(steps):
        examples = client.warm_start(batch, seed=seed * 100003 + step, dataset=dataset)
        t = from_examples(examples).to(device)
        logits = model(t.ids)[0]
        loss, acc = sft_loss(logits, t.targets, t.mask)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            log(f"{tag} step={step + 1}/{steps} loss={loss.item():.4f} token_acc={acc:.3f} "
                f"elapsed={time.time() - t0:.1f}s")


def save(model, path):
    """A teacher's weights: a Flotilla safetensors file, or for a Hugging Face model a folder."""
    if isinstance(model, models.hf.HFCausalLM):
        models.hf.save_folder(model, path)
        return
    save_file({k: v.float().cpu() for k, v in model.export_state().items()}, path + ".tmp")
    os.replace(path + ".tmp", path)


def train_teachers(client, status, args, device):
    """OPD set-up: trains each teacher with SFT on its own datasets (sub-domain experts)."""
    for t in status.teachers:
        if os.path.exists(t.weights) and not args.retrain_teachers:
            continue
        with open(t.model_config) as f:
            model = models.build(f.read(), seed=args.seed + 17, source=t.model_config).to(device)
        datasets = [d.name for d in status.datasets if d.name in t.domains or d.domain in t.domains]
        opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, weight_decay=0.0)
        for ds in datasets:
            sft(model, opt, client, args.teacher_steps, args.sft_batch, args.seed + 7, device, ds, f"teacher {t.name}/{ds}")
        os.makedirs(os.path.dirname(os.path.abspath(t.weights)), exist_ok=True)
        save(model, t.weights)
        log(f"teacher {t.name} written to {t.weights}")


def lr_factor(schedule, rl_steps):
    """The RL learning rate's factor at optimizer step i (0-based), over this process's rl_steps
    (a resumed trainer runs that many again); None for a constant rate. "linear": 1 decaying
    linearly to 0.1 at rl_steps. "warmup-linear": (i + 1) / W for the first W = rl_steps / 10
    steps (at least 1), then the linear decay: a fresh Adam's first updates move every weight by
    about the full rate whatever its gradient, which a warm-started policy does not survive."""
    if schedule == "constant":
        return None
    decay = lambda i: max(0.1, 1.0 - 0.9 * i / max(1, rl_steps))  # noqa: E731
    if schedule == "linear":
        return decay
    warm = max(1, rl_steps // 10)
    return lambda i: (i + 1) / warm if i < warm else decay(i)


def reference_logp_fn(model, out_dir, config_text, device):
    """The KL penalty's reference: the warm start, i.e. the weights published as version 0 (kept
    for the whole run: only versions > 0 are ever removed). Its token logprobs, without gradient,
    on the samples' own routing (as the policy's)."""
    ref = copy.deepcopy(model)
    models.restore(ref, models.publish_path(out_dir, 0, model))
    ref.to(device).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return lambda mb: token_logprobs(models.forward_replay(ref, mb.ids, mb.routing), mb.targets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bridge", default=os.environ.get("FLOTILLA_BRIDGE", ""))
    ap.add_argument("--out", required=True, help="directory for published weights")
    ap.add_argument("--loss", choices=["grpo", "opd"], default="grpo")
    ap.add_argument("--init", default="random",
                    help="random, a Flotilla safetensors file, or a Hugging Face checkpoint folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sft-steps", type=int, default=0)
    ap.add_argument("--sft-batch", type=int, default=64)
    ap.add_argument("--sft-lr", type=float, default=3e-3)
    ap.add_argument("--teacher-steps", type=int, default=300)
    ap.add_argument("--retrain-teachers", action="store_true")
    ap.add_argument("--teachers-only", action="store_true",
                    help="OPD set-up only: train the experiment's teachers (SFT per sub-domain) and exit")
    ap.add_argument("--rl-steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--clip-eps", type=float, default=0.2)
    ap.add_argument("--kl-coef", type=float, default=0.0,
                    help="GRPO: weight of KL(policy || warm start) in the loss (the warm start: version 0)")
    ap.add_argument("--ppo-epochs", type=int, default=1,
                    help="GRPO: passes over each batch per trainer step")
    ap.add_argument("--minibatches", type=int, default=1,
                    help="GRPO: optimizer updates per pass (the batch's samples split this many ways)")
    ap.add_argument("--lr-schedule", choices=["constant", "linear", "warmup-linear"], default="constant",
                    help="RL learning rate: constant; linear decay to 10%% of --lr at --rl-steps; or "
                         "warmup-linear: a linear rise over the first 10%% of --rl-steps, then that decay")
    ap.add_argument("--publish-every", type=int, default=1)
    ap.add_argument("--time-limit-s", type=float, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.ppo_epochs < 1 or a.minibatches < 1:
        ap.error(f"--ppo-epochs and --minibatches must be >= 1, got {a.ppo_epochs} and {a.minibatches}")
    if a.kl_coef < 0:
        ap.error(f"--kl-coef must be >= 0, got {a.kl_coef}")

    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, a.threads))
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    os.makedirs(a.out, exist_ok=True)
    client = BridgeClient(a.bridge)
    status = client.status()
    if a.init != "random" and models.is_hf_folder(a.init):
        model = models.load(a.init)
    elif a.init != "random":
        model = models.load(a.init, status.model_config_json)
    else:
        model = models.build(status.model_config_json, seed=a.seed, source="bridge model config")
    n_routing_layers, top_k = models.routing_shape(model)
    log(f"device={device} experiment={status.experiment} params="
        f"{sum(p.numel() for p in model.parameters())}")

    if a.loss == "opd" or a.teachers_only:
        train_teachers(client, status, a, device)
    if a.teachers_only:
        client.close()
        return

    model.to(device)
    start_version = status.policy_version
    if a.sft_steps > 0 and start_version == 0:
        opt = torch.optim.AdamW(model.parameters(), lr=a.sft_lr, weight_decay=0.0)
        sft(model, opt, client, a.sft_steps, a.sft_batch, a.seed, device)
    version = start_version
    path = models.publish_path(a.out, version, model)
    if not os.path.exists(path) or start_version == 0:
        path = models.save(model, a.out, version)
    else:
        models.restore(model, path)
    client.publish(version, path)
    log(f"published v{version}; starting {a.loss}")

    ref_logp_fn = None
    if a.kl_coef > 0 and a.loss == "grpo":
        ref_logp_fn = reference_logp_fn(model, a.out, status.model_config_json, device)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0, betas=(0.9, 0.99))
    shuffle = torch.Generator().manual_seed(a.seed)  # minibatch order
    factor = lr_factor(a.lr_schedule, a.rl_steps)
    sched = None if factor is None else torch.optim.lr_scheduler.LambdaLR(opt, factor)
    t0 = time.time()
    steps = 0
    timing = {"wait_s": 0.0, "train_s": 0.0, "publish_s": 0.0}
    mark = time.time()
    for batch in client.batches(trainer_version=version):
        timing["wait_s"] += time.time() - mark
        mark = time.time()
        t = from_batch(batch, n_routing_layers, top_k).to(device)
        model.train()
        if a.loss == "opd" and t.teacher is not None:
            logits = models.forward_replay(model, t.ids, t.routing)
            loss, stats = opd_loss(logits, t.targets, t.mask, t.teacher)
            opt.zero_grad()
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0).item()
            opt.step()
        else:
            loss, stats = ppo_step(
                lambda mb: token_logprobs(models.forward_replay(model, mb.ids, mb.routing), mb.targets),
                params, opt, t, version, ppo_epochs=a.ppo_epochs, minibatches=a.minibatches,
                clip_eps=a.clip_eps, generator=shuffle, ref_logp_fn=ref_logp_fn, kl_coef=a.kl_coef)
            gnorm = stats.pop("grad_norm")
        if sched is not None:
            sched.step()
        steps += 1
        timing["train_s"] += time.time() - mark
        mark = time.time()
        published = steps % a.publish_every == 0
        if published:
            version += 1
            path = models.save(model, a.out, version)
            client.publish(version, path)
            if version - 3 > 0:
                models.remove(a.out, version - 3, model)
        timing["publish_s"] += time.time() - mark
        rewards = [s.reward for s in batch.samples]
        done = steps >= a.rl_steps or (a.time_limit_s > 0 and time.time() - t0 >= a.time_limit_s)
        client.report(batch.step, loss=loss.item(), grad_norm=gnorm, reward=sum(rewards) / len(rewards),
                      version=version, stale_masked=batch.stale_masked_tokens, done=1 if done else 0,
                      **stats, **timing)
        mark = time.time()
        if done:
            break
    log(f"done: {steps} steps, version {version}, {time.time() - t0:.1f}s")
    client.close()


if __name__ == "__main__":
    main()
