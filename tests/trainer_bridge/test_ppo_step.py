"""The trainer's PPO step (flotilla_trainer.ppo) with real PyTorch on CPU: updates per step,
clipping against the policy before the step's first update, the decoupled importance weight on
stale tokens, and train.py's loop reporting the step's figures."""
import json
import os
import shutil
import sys
import tempfile
import types
import unittest

import torch

SRC = os.environ.get("FLOTILLA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "trainer_bridge", "python"))

from flotilla_trainer import models  # noqa: E402
from flotilla_trainer.batching import Tensors, from_batch  # noqa: E402
from flotilla_trainer.losses import token_logprobs  # noqa: E402
from flotilla_trainer.ppo import minibatch_rows, ppo_step  # noqa: E402

# The main job's policy (examples/arith-grpo): a 2-layer MoE.
ARITH_MODEL = json.dumps({"vocab_size": 272, "n_layers": 2, "d_model": 64, "n_heads": 2, "n_kv_heads": 2,
                          "head_dim": 32, "n_experts": 4, "top_k": 2, "n_shared_experts": 1,
                          "expert_hidden": 64, "max_context": 64})
PROMPT, GEN, SAMPLES = 6, 6, 8


def arith_batch(version=3, old_version=1, stale_samples=(0, 1)):
    """Eight samples of 6 prompt + 6 generated tokens, advantage +1 / -1 alternating; the
    generated tokens of `stale_samples` carry policy version `old_version`, the others `version`."""
    g = torch.Generator().manual_seed(11)
    samples = []
    for i in range(SAMPLES):
        n = PROMPT + GEN
        v = old_version if i in stale_samples else version
        samples.append(types.SimpleNamespace(
            ids=torch.randint(4, 272, (n,), generator=g).tolist(), loss_mask=[0] * PROMPT + [1] * GEN,
            behaviour_logprobs=[0.0] * n, policy_versions=[-1] * PROMPT + [v] * GEN,
            advantage=1.0 if i % 2 == 0 else -1.0, routing_width=0, routing=[], teacher_width=0,
            teacher_logprobs=[], teacher_ids=[], reward=1.0 if i % 2 == 0 else 0.0))
    return types.SimpleNamespace(samples=samples, policy_version=version, stale_masked_tokens=0, step=0)


def replay_logp(model):
    return lambda mb: token_logprobs(models.forward_replay(model, mb.ids, mb.routing), mb.targets)


class PpoStepTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = models.build(ARITH_MODEL, seed=3)
        L, k = models.routing_shape(self.model)
        self.t = from_batch(arith_batch(), L, k)
        # The engine's logprobs: the initial policy's, so the importance weight starts at 1.
        with torch.no_grad():
            self.t.behaviour = replay_logp(self.model)(self.t) * self.t.mask

    def step(self, ppo_epochs, minibatches, lr=1e-2):
        params = list(self.model.parameters())
        opt = torch.optim.Adam(params, lr=lr)
        return ppo_step(replay_logp(self.model), params, opt, self.t, current_version=3,
                        ppo_epochs=ppo_epochs, minibatches=minibatches, clip_eps=0.2,
                        generator=torch.Generator().manual_seed(5))

    def test_samples_without_tokens_are_padding_and_the_step_changes_nothing(self):
        # An agent that never reached the engine leaves a sample without tokens.
        batch = arith_batch()
        for s in batch.samples:
            s.ids, s.loss_mask, s.behaviour_logprobs, s.policy_versions = [], [], [], []
        L, k = models.routing_shape(self.model)
        t = from_batch(batch, L, k)
        self.assertEqual(tuple(t.ids.shape), (SAMPLES, 1))
        self.assertEqual(float(t.mask.sum()), 0.0)
        before = [p.detach().clone() for p in self.model.parameters()]
        params = list(self.model.parameters())
        _, stats = ppo_step(replay_logp(self.model), params, torch.optim.Adam(params, lr=1e-2), t, current_version=3)
        self.assertEqual(stats["loss_mean"], 0.0)
        for a, b in zip(before, self.model.parameters()):
            self.assertTrue(torch.equal(a, b))

    def test_one_update_per_step_clips_nothing(self):
        _, stats = self.step(1, 1)
        self.assertEqual(stats["updates"], 1.0)
        self.assertEqual(stats["clip_frac_first"], 0.0)
        self.assertEqual(stats["clip_frac"], 0.0)
        self.assertAlmostEqual(stats["iw_mean"], 1.0, places=6)

    def test_several_updates_per_step_clip(self):
        _, stats = self.step(4, 2)
        self.assertEqual(stats["updates"], 8.0)
        self.assertEqual(stats["clip_frac_first"], 0.0)  # the first update starts at pi_prox
        self.assertGreater(stats["clip_frac"], 0.0)
        self.assertLess(stats["clip_frac"], 1.0)

    def test_proximal_policy_is_the_policy_before_the_first_update(self):
        # behaviour == the policy before the step, so pi_prox / pi_behaviour is 1 on every token
        # only if pi_prox was computed before any update moved the weights.
        before = replay_logp(self.model)(self.t).detach()
        _, stats = self.step(4, 2)
        after = replay_logp(self.model)(self.t).detach()
        self.assertGreater(((after - before).abs() * self.t.mask).max().item(), 0.05)  # it did move
        self.assertAlmostEqual(stats["iw_mean"], 1.0, places=6)
        self.assertAlmostEqual(stats["behaviour_kl"], 0.0, places=6)

    def test_stale_token_fraction_counts_tokens_of_older_versions(self):
        _, stats = self.step(1, 1)
        self.assertEqual(stats["stale_token_frac"], 2 * GEN / (SAMPLES * GEN))

    def test_minibatches_partition_the_batch(self):
        rows = minibatch_rows(8, 3, torch.Generator().manual_seed(1))
        self.assertEqual([len(r) for r in rows], [3, 3, 2])
        self.assertEqual(sorted(torch.cat(rows).tolist()), list(range(8)))
        self.assertEqual(len(minibatch_rows(2, 4, torch.Generator().manual_seed(1))), 2)

    def test_reference_kl_pulls_back_towards_the_reference(self):
        # Reference = the policy before the step: the first update's KL is exactly 0; later
        # updates move away from it, and a large kl_coef keeps them closer than none does.
        ref_model = models.build(ARITH_MODEL, seed=3)
        ref_fn = replay_logp(ref_model)
        start = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

        def run(kl_coef):
            self.model.load_state_dict(start)
            params = list(self.model.parameters())
            _, stats = ppo_step(replay_logp(self.model), params, torch.optim.Adam(params, lr=1e-2), self.t,
                                current_version=3, ppo_epochs=4, minibatches=1, ref_logp_fn=ref_fn, kl_coef=kl_coef,
                                generator=torch.Generator().manual_seed(5))
            with torch.no_grad():
                end = ref_fn(self.t)
                moved = ((replay_logp(self.model)(self.t) - end).abs() * self.t.mask).sum().item()
            return stats, moved

        free, moved_free = run(0.0)
        held, moved_held = run(50.0)
        self.assertGreater(free["ref_kl"], 0.0)  # reported even at coefficient 0
        self.assertLess(moved_held, moved_free / 2)
        _, first = ppo_step(replay_logp(self.model), list(self.model.parameters()),
                            torch.optim.Adam(self.model.parameters(), lr=0.0), self.t, current_version=3,
                            ref_logp_fn=replay_logp(self.model), kl_coef=1.0)
        self.assertEqual(first["ref_kl"], 0.0)

    def test_bad_counts_are_refused(self):
        with self.assertRaises(ValueError):
            self.step(0, 1)


class CategoricalPolicy(torch.nn.Module):
    """One next-token distribution over 3 ids: pi = softmax(theta)."""

    def __init__(self, probs):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.log(torch.tensor(probs)))

    def logp(self, mb):
        return torch.log_softmax(self.theta, -1)[mb.targets]


def categorical_batch(tokens, behaviour_probs, version):
    """One generated token per row; advantage a function of the token."""
    adv = {0: 1.0, 1: -0.5, 2: 0.25}
    n = len(tokens)
    targets = torch.tensor(tokens).view(n, 1)
    behaviour = torch.log(torch.tensor([behaviour_probs[x] for x in tokens])).view(n, 1)
    return Tensors(ids=torch.zeros(n, 1, dtype=torch.long), targets=targets, mask=torch.ones(n, 1),
                   behaviour=behaviour, advantage=torch.tensor([adv[x] for x in tokens]).view(n, 1),
                   routing=None, versions=torch.full((n, 1), version, dtype=torch.long))


class ImportanceWeightTest(unittest.TestCase):
    """Tokens sampled by an older policy b, weighted by pi_prox / b, train exactly as tokens
    sampled by pi_prox itself. Constructed case: b = (1/2, 1/4, 1/4), pi_prox = (1/4, 1/4, 1/2);
    four rows in exact proportion to each, so each batch's mean is its policy's expectation."""

    OLD = [0.5, 0.25, 0.25]
    NOW = [0.25, 0.25, 0.5]

    def train(self, batch, epochs=3):
        policy = CategoricalPolicy(self.NOW)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        _, stats = ppo_step(policy.logp, list(policy.parameters()), opt, batch, current_version=5,
                            ppo_epochs=epochs, minibatches=1, clip_eps=0.2, max_grad_norm=1e9)
        return policy.theta.detach(), stats

    def test_weighted_stale_batch_trains_like_the_on_policy_one(self):
        on_policy, on_stats = self.train(categorical_batch([0, 1, 2, 2], self.NOW, version=5))
        stale, stale_stats = self.train(categorical_batch([0, 0, 1, 2], self.OLD, version=3))
        self.assertTrue(torch.allclose(stale, on_policy, atol=1e-6), f"{stale} vs {on_policy}")
        self.assertEqual(on_stats["stale_token_frac"], 0.0)
        self.assertEqual(stale_stats["stale_token_frac"], 1.0)
        # Weights 1/2, 1/2, 1, 2: their mean under b is exactly 1.
        self.assertAlmostEqual(stale_stats["iw_mean_stale"], 1.0, places=6)
        self.assertAlmostEqual(on_stats["iw_mean"], 1.0, places=6)

    def test_without_the_weight_the_stale_batch_trains_elsewhere(self):
        on_policy, _ = self.train(categorical_batch([0, 1, 2, 2], self.NOW, version=5))
        # The same stale tokens, their behaviour logprobs replaced by the current policy's: no
        # correction.
        unweighted, stats = self.train(categorical_batch([0, 0, 1, 2], self.NOW, version=3))
        self.assertAlmostEqual(stats["iw_mean"], 1.0, places=6)
        self.assertGreater((unweighted - on_policy).abs().max().item(), 1e-2)

    def test_first_update_gradient_is_the_on_policy_expectation(self):
        policy = CategoricalPolicy(self.NOW)
        p = torch.tensor(self.NOW)
        adv = torch.tensor([1.0, -0.5, 0.25])
        # d/dtheta E_p[A] through the surrogate at r = 1: sum_x p(x) A(x) (e_x - p).
        want = sum(p[x] * adv[x] * (torch.eye(3)[x] - p) for x in range(3))
        opt = torch.optim.SGD(policy.parameters(), lr=1.0)
        start = policy.theta.detach().clone()
        ppo_step(policy.logp, list(policy.parameters()), opt, categorical_batch([0, 0, 1, 2], self.OLD, 3),
                 current_version=5, max_grad_norm=1e9)
        self.assertTrue(torch.allclose(policy.theta.detach() - start, want, atol=1e-6))


class FakeBridge:
    """Stands in for the TrainerBridge service: hands out the given batches and records what the
    trainer publishes and reports."""

    def __init__(self, batches, config_json):
        self.batches_, self.config_json = batches, config_json
        self.published, self.reports = [], []

    def status(self):
        return types.SimpleNamespace(model_config_json=self.config_json, experiment="ppo-test", policy_version=0,
                                     teachers=[], datasets=[])

    def batches(self, trainer_version=0, batch_size=0, prefetch=1):
        return iter(self.batches_)

    def publish(self, version, path, model=""):
        self.published.append((version, path))

    def report(self, step, **metrics):
        self.reports.append((step, metrics))

    def close(self):
        pass


class TrainLoopTest(unittest.TestCase):
    def test_reports_updates_clipping_and_staleness_per_step(self):
        try:
            from flotilla_trainer import train
        except ImportError as e:
            self.skipTest(f"trainer gRPC stubs not built: {e}")
        batches = []
        for step in range(2):
            b = arith_batch(version=step, old_version=step - 1 if step else 0, stale_samples=(0,))
            b.step = step
            batches.append(b)
        bridge = FakeBridge(batches, ARITH_MODEL)
        out = tempfile.mkdtemp()
        saved = train.BridgeClient, sys.argv
        try:
            train.BridgeClient = lambda address: bridge
            sys.argv = ["train", "--bridge", "fake", "--out", out, "--rl-steps", "2", "--lr", "0.01",
                        "--device", "cpu", "--ppo-epochs", "2", "--minibatches", "2"]
            train.main()
        finally:
            train.BridgeClient, sys.argv = saved
            shutil.rmtree(out)
        self.assertEqual([v for v, _ in bridge.published], [0, 1, 2])
        self.assertEqual([s for s, _ in bridge.reports], [0, 1])
        first, second = bridge.reports[0][1], bridge.reports[1][1]
        self.assertEqual(first["updates"], 4.0)
        self.assertEqual(first["clip_frac_first"], 0.0)
        for key in ("clip_frac", "iw_mean", "iw_mean_stale", "grad_norm", "loss"):
            self.assertIn(key, first)
        self.assertEqual(first["stale_token_frac"], 0.0)  # the trainer holds v0: nothing older
        self.assertEqual(second["stale_token_frac"], 1 / SAMPLES)  # sample 0 is from v0, trainer v1

    def test_kl_to_the_warm_start_is_reported_per_step(self):
        try:
            from flotilla_trainer import train
        except ImportError as e:
            self.skipTest(f"trainer gRPC stubs not built: {e}")
        batches = []
        for step in range(2):
            b = arith_batch(version=step, old_version=step, stale_samples=())
            b.step = step
            batches.append(b)
        bridge = FakeBridge(batches, ARITH_MODEL)
        out = tempfile.mkdtemp()
        saved = train.BridgeClient, sys.argv
        try:
            train.BridgeClient = lambda address: bridge
            sys.argv = ["train", "--bridge", "fake", "--out", out, "--rl-steps", "2", "--lr", "0.01",
                        "--device", "cpu", "--kl-coef", "0.5", "--lr-schedule", "warmup-linear"]
            train.main()
        finally:
            train.BridgeClient, sys.argv = saved
            shutil.rmtree(out)
        first, second = bridge.reports[0][1], bridge.reports[1][1]
        self.assertEqual(first["ref_kl"], 0.0)  # the first update starts at the reference (v0)
        self.assertGreater(second["ref_kl"], 0.0)

    def test_learning_rate_factors(self):
        try:
            from flotilla_trainer.train import lr_factor
        except ImportError as e:
            self.skipTest(f"trainer gRPC stubs not built: {e}")
        self.assertIsNone(lr_factor("constant", 100))
        linear = lr_factor("linear", 100)
        self.assertEqual([linear(i) for i in (0, 50, 100, 200)], [1.0, 1.0 - 0.45, 0.1, 0.1])
        warm = lr_factor("warmup-linear", 100)  # 10 warm-up steps
        self.assertEqual([warm(i) for i in (0, 4, 9)], [0.1, 0.5, 1.0])
        self.assertEqual([warm(i) for i in (10, 50, 100)], [1.0 - 0.09, 1.0 - 0.45, 0.1])
        self.assertEqual(lr_factor("warmup-linear", 5)(0), 1.0)  # at least one step


if __name__ == "__main__":
    unittest.main()
