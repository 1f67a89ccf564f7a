"""Python trainer: GRPO, OPD and SFT losses against hand-computed values, and batch layout."""
import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.environ.get("FLOTILLA_SOURCE_DIR", "."), "trainer_bridge", "python"))

from flotilla_trainer.losses import grpo_loss, opd_loss, sft_loss, token_logprobs  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
