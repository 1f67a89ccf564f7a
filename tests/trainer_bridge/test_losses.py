"""Python trainer: GRPO, OPD and SFT losses against hand-computed values, and batch layout."""
import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))

from flotilla_trainer.tokenizer import PAD  # noqa: E402
from flotilla_trainer.losses import grpo_loss, opd_loss, reference_kl, sft_loss, token_logprobs  # noqa: E402


class GrpoLossTest(unittest.TestCase):
    def test_on_policy_gradient_is_advantage_weighted_logprob(self):
        logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
        adv = torch.tensor([[2.0, 2.0, -1.0]])
        mask = torch.tensor([[1.0, 1.0, 0.0]])
        loss, stats = grpo_loss(logp, logp.detach(), logp.detach(), adv, mask)
        self.assertAlmostEqual(loss.item(), -2.0, places=6)  # -(2 + 2) / 2
        loss.backward()
        self.assertEqual(logp.grad.tolist(), [[-1.0, -1.0, 0.0]])
        self.assertEqual(stats["clip_frac"], 0.0)
        self.assertAlmostEqual(stats["iw_mean"], 1.0)

    def test_clipping_and_decoupled_importance_weight(self):
        prox = torch.tensor([[math.log(0.5), math.log(0.5)]])
        logp = torch.tensor([[math.log(0.75), math.log(0.25)]], requires_grad=True)  # r = 1.5, 0.5
        behaviour = torch.tensor([[math.log(0.25), math.log(0.5)]])  # iw = 2, 1
        adv = torch.tensor([[1.0, 1.0]])
        mask = torch.ones(1, 2)
        loss, stats = grpo_loss(logp, prox, behaviour, adv, mask, clip_eps=0.2)
        # token 0: min(1.5, 1.2) * 1 = 1.2, weighted 2 -> 2.4; token 1: min(0.5, 0.8) = 0.5.
        self.assertAlmostEqual(loss.item(), -(2.4 + 0.5) / 2, places=5)
        self.assertAlmostEqual(stats["clip_frac"], 1.0)  # both ratios lie outside [0.8, 1.2]
        loss.backward()
        self.assertAlmostEqual(logp.grad[0, 0].item(), 0.0, places=6)  # clipped: no gradient
        self.assertAlmostEqual(logp.grad[0, 1].item(), -0.5 / 2, places=6)  # d(r)/dlogp = r = 0.5

    def test_importance_weight_is_capped(self):
        logp = torch.zeros(1, 1, requires_grad=True)
        loss, stats = grpo_loss(logp, logp.detach(), torch.tensor([[-10.0]]), torch.ones(1, 1), torch.ones(1, 1),
                                iw_cap=5.0)
        self.assertAlmostEqual(stats["iw_mean"], 5.0, places=5)
        self.assertAlmostEqual(loss.item(), -5.0, places=5)


    def test_reference_kl_penalty(self):
        # d = logp - ref = -log 2 and +log 2: 0.5 d^2 = 0.5 (log 2)^2 on both, whichever side.
        logp = torch.tensor([[math.log(0.25), math.log(0.5), 0.0]], requires_grad=True)
        ref = torch.tensor([[math.log(0.5), math.log(0.25), -3.0]])
        half_sq = 0.5 * math.log(2) ** 2
        self.assertAlmostEqual(reference_kl(logp, ref)[0, 0].item(), half_sq, places=6)
        self.assertAlmostEqual(reference_kl(logp, ref)[0, 1].item(), half_sq, places=6)
        self.assertEqual(reference_kl(ref, ref).tolist(), [[0.0, 0.0, 0.0]])
        adv = torch.tensor([[1.0, -1.0, 5.0]])
        mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is context: no loss
        loss, stats = grpo_loss(logp, logp.detach(), logp.detach(), adv, mask, ref_logp=ref, kl_coef=0.5)
        self.assertAlmostEqual(stats["ref_kl"], half_sq, places=6)
        self.assertAlmostEqual(loss.item(), -(1.0 - 1.0) / 2 + 0.5 * half_sq, places=6)
        loss.backward()
        # Per token -adv / 2 from the surrogate plus 0.5 x d / 2 from the penalty.
        g = logp.grad[0].tolist()
        self.assertAlmostEqual(g[0], -1.0 / 2 + 0.5 * -math.log(2) / 2, places=6)
        self.assertAlmostEqual(g[1], 1.0 / 2 + 0.5 * math.log(2) / 2, places=6)
        self.assertEqual(g[2], 0.0)

    def test_zero_kl_coef_reports_but_does_not_penalise(self):
        logp = torch.tensor([[math.log(0.25)]], requires_grad=True)
        ref = torch.tensor([[math.log(0.5)]])
        loss, stats = grpo_loss(logp, logp.detach(), logp.detach(), torch.ones(1, 1), torch.ones(1, 1), ref_logp=ref)
        self.assertAlmostEqual(loss.item(), -1.0, places=6)
        self.assertAlmostEqual(stats["ref_kl"], 0.5 * math.log(2) ** 2, places=6)


class OpdLossTest(unittest.TestCase):
    def test_full_vocab_reverse_kl(self):
        logits = torch.log(torch.tensor([[[0.5, 0.5]]]))
        teacher = {"full": torch.log(torch.tensor([[[0.25, 0.75]]]))}
        loss, stats = opd_loss(logits, torch.tensor([[1]]), torch.ones(1, 1), teacher)
        want = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
        self.assertAlmostEqual(loss.item(), want, places=6)
        self.assertAlmostEqual(stats["sampled_rkl"], math.log(0.5 / 0.75), places=6)

    def test_top_k_reverse_kl_renormalises(self):
        logits = torch.log(torch.tensor([[[0.4, 0.4, 0.2]]]))
        teacher = {"top_ids": torch.tensor([[[0, 2]]]), "top_lp": torch.log(torch.tensor([[[0.5, 0.25]]]))}
        loss, _ = opd_loss(logits, torch.tensor([[0]]), torch.ones(1, 1), teacher)
        s = [0.4 / 0.6, 0.2 / 0.6]
        t = [2 / 3, 1 / 3]
        want = sum(si * math.log(si / ti) for si, ti in zip(s, t))
        self.assertAlmostEqual(loss.item(), want, places=6)

    def test_identical_teacher_gives_zero(self):
        logits = torch.randn(2, 3, 5)
        teacher = {"full": torch.log_softmax(logits, -1)}
        loss, _ = opd_loss(logits, torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3), teacher)
        self.assertAlmostEqual(loss.item(), 0.0, places=6)


class SftLossTest(unittest.TestCase):
    def test_masked_cross_entropy(self):
        logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
        targets = torch.tensor([[0, 0]])
        loss, acc = sft_loss(logits, targets, torch.tensor([[0.0, 1.0]]))
        self.assertAlmostEqual(loss.item(), -math.log(0.9), places=6)
        self.assertEqual(acc, 1.0)
        self.assertAlmostEqual(token_logprobs(logits, targets)[0, 0].item(), math.log(0.5), places=6)


class PackExamplesTest(unittest.TestCase):
    class Ex:
        def __init__(self, prompt, target):
            self.prompt, self.target = prompt, target

    def test_turns_of_one_episode_share_a_sequence_with_the_same_loss(self):
        from flotilla_trainer.batching import from_examples, pack_examples
        # Episode 1: turn 1 = [1,2] -> [3]; turn 2 = [1,2,3,4] -> [5,6]. Episode 2: one turn.
        ex = [self.Ex([1, 2], [3]), self.Ex([1, 2, 3, 4], [5, 6]), self.Ex([7], [8, 9])]
        self.assertEqual(pack_examples(ex), [([1, 2, 3, 4, 5, 6], [2, 4, 5]), ([7, 8, 9], [1, 2])])
        t = from_examples(ex)
        self.assertEqual(t.ids.tolist(), [[1, 2, 3, 4, 5], [7, 8, PAD, PAD, PAD]])
        self.assertEqual(t.targets.tolist(), [[2, 3, 4, 5, 6], [8, 9, PAD, PAD, PAD]])
        self.assertEqual(t.mask.tolist(), [[0, 1, 0, 1, 1], [1, 1, 0, 0, 0]])
        # Same loss as the examples one by one: every target token scored once, from the same context.
        torch.manual_seed(0)
        table = torch.randn(PAD + 1, PAD + 1)
        logits = lambda ids: table[ids] + 0.1 * torch.cumsum(table[ids], dim=1)  # causal
        packed, _ = sft_loss(logits(t.ids), t.targets, t.mask)
        total, count = 0.0, 0
        for e in ex:
            one = from_examples([e])
            lp = torch.log_softmax(logits(one.ids), -1).gather(-1, one.targets.unsqueeze(-1)).squeeze(-1)
            total += -(lp * one.mask).sum().item()
            count += int(one.mask.sum().item())
        self.assertAlmostEqual(packed.item(), total / count, places=5)

    def test_unrelated_examples_stay_apart(self):
        from flotilla_trainer.batching import pack_examples
        ex = [self.Ex([1, 2], [3]), self.Ex([1, 5, 3], [4]), self.Ex([1], [2])]
        self.assertEqual([len(s) for s, _ in pack_examples(ex)], [3, 4, 2])


if __name__ == "__main__":
    unittest.main()
