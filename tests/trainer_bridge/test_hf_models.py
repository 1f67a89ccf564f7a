"""The trainer's own Hugging Face modules against transformers' goldens (testdata/hf/).

Each fixture folder was made by transformers 5.x (make_hf_fixtures.py) with golden.json holding
transformers' float32 log-probs of the next token, argmax ids and chosen experts. Checks: log-probs
within 1e-4, same routing, routing replay, one training step through the trainer's loss and
batch layout, publishing (same tensor names and dtypes, same logits after loading back), and
errors that name the file and field.
"""
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

from flotilla_trainer import hf, models  # noqa: E402
from flotilla_trainer.batching import from_batch  # noqa: E402
from flotilla_trainer.losses import grpo_loss, sft_loss, token_logprobs  # noqa: E402
from flotilla_trainer.safetensors_io import read_header  # noqa: E402

DATA = os.path.join(SRC, "tests", "trainer_bridge", "testdata", "hf")
# The engine's fixtures (same kind, made by the same transformers) when this tree has them.
ENGINE_DATA = os.path.join(SRC, "tests", "inference", "testdata", "hf")
TOL = 1e-4


def fixture_dirs(root):
    if not os.path.isdir(root):
        return []
    out = []
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if not os.path.exists(os.path.join(path, "golden.json")):
            continue
        with open(os.path.join(path, "config.json")) as f:
            if "quantization_config" in json.load(f):  # FP8 release format: the engine's, not the trainer's
                continue
        out.append(path)
    return out


FIXTURES = fixture_dirs(DATA)


def golden(path):
    """(ids [B,T], next-token log-probs [B,T-1], argmax [B,T-1], routing [B,T,L,k] sorted)."""
    with open(os.path.join(path, "golden.json")) as f:
        g = json.load(f)
    if "sequences" in g:  # the engine fixtures' layout: one entry per sequence, experts by layer
        seqs = g["sequences"]
        ids = torch.tensor([s["ids"] for s in seqs])
        lp = torch.tensor([s["logprob"] for s in seqs])
        top1 = torch.tensor([s["top1"] for s in seqs])
        layers = sorted(seqs[0]["experts"], key=int)
        if not layers:
            return ids, lp, top1, torch.zeros(ids.shape[0], ids.shape[1], 0, 1, dtype=torch.long)
        routing = torch.stack([torch.stack([torch.tensor(s["experts"][k]) for k in layers], dim=1)
                               for s in seqs])
        return ids, lp, top1, routing.long()
    ids = torch.tensor(g["ids"])
    r = g["routing"]  # [B][T][L][k]; L = 0 for a dense model
    k = len(r[0][0][0]) if r[0][0] else 1
    routing = torch.tensor(r, dtype=torch.long).view(ids.shape[0], ids.shape[1], -1, k)
    return ids, torch.tensor(g["logprobs"]), torch.tensor(g["top1"]), routing


def next_logprobs(model, ids, routing=None):
    with torch.no_grad():
        logits, used = model(ids, routing)
    return token_logprobs(logits[:, :-1], ids[:, 1:]), logits, used


def names_and_dtypes(folder):
    out = {}
    for path in set(hf.weight_files(folder).values()):
        for k, v in read_header(path)[0].items():
            out[k] = v["dtype"]
    return out


class GoldenTest(unittest.TestCase):
    def test_fixtures_present(self):
        self.assertGreaterEqual(len(FIXTURES), 7, f"fixtures in {DATA}")
        families = set()
        for f in FIXTURES:
            with open(os.path.join(f, "config.json")) as cf:
                families.add(json.load(cf)["model_type"])
        self.assertEqual(families, set(hf.config.FAMILIES))

    def check_folder(self, path):
        ids, want, top1, routing = golden(path)
        model = hf.load_folder(path).eval()
        lp, logits, used = next_logprobs(model, ids)
        self.assertLessEqual((lp - want).abs().max().item(), TOL)
        self.assertTrue(torch.equal(logits[:, :-1].argmax(-1), top1))
        self.assertEqual(tuple(used.shape), tuple(routing.shape))
        self.assertTrue(torch.equal(used.sort(-1).values, routing))
        lp_replay, _, used_replay = next_logprobs(model, ids, routing)
        self.assertLessEqual((lp_replay - want).abs().max().item(), TOL)
        self.assertTrue(torch.equal(used_replay, routing))

    def test_logprobs_and_routing_match_transformers(self):
        for path in FIXTURES:
            with self.subTest(fixture=os.path.basename(path)):
                self.check_folder(path)

    def test_engine_fixtures_match_too(self):
        paths = fixture_dirs(ENGINE_DATA)
        if not paths:
            self.skipTest(f"no engine fixtures in {ENGINE_DATA}")
        for path in paths:
            with self.subTest(fixture=os.path.basename(path)):
                self.check_folder(path)

    def test_replay_forces_other_experts(self):
        for path in FIXTURES:
            ids, want, _, routing = golden(path)
            if routing.shape[2] == 0:
                continue
            with self.subTest(fixture=os.path.basename(path)):
                model = hf.load_folder(path).eval()
                E = model.c.n_experts
                other = (routing + 1) % E  # distinct ids per row, none the router chose for k < E/2
                other[:, :8] = -1  # -1 rows: routed by the model
                lp, _, used = next_logprobs(model, ids, other)
                self.assertTrue(torch.equal(used[:, 8:], other[:, 8:]))
                self.assertTrue(torch.equal(used[:, :8].sort(-1).values, routing[:, :8]))
                self.assertGreater((lp[:, 8:] - want[:, 8:]).abs().max().item(), 1e-3)


def make_batch(ids, routing):
    """A bridge Batch: sample 0 is ids[0] with the engine's routing on its generated half."""
    n = ids.shape[1]
    L, k = routing.shape[2], routing.shape[3]
    rows = routing[0].clone()
    rows[: n // 2] = -1
    sample = types.SimpleNamespace(
        ids=ids[0].tolist(), loss_mask=[0] * (n // 2) + [1] * (n - n // 2),
        behaviour_logprobs=[0.0] * n, advantage=1.0, routing_width=L * k,
        routing=rows.reshape(-1).tolist() if L else [], teacher_width=0, teacher_logprobs=[],
        teacher_ids=[], policy_versions=[-1] * (n // 2) + [0] * (n - n // 2), reward=1.0)
    return types.SimpleNamespace(samples=[sample])


class TrainTest(unittest.TestCase):
    def test_one_step_lowers_the_loss(self):
        for path in FIXTURES:
            with self.subTest(fixture=os.path.basename(path)):
                ids, _, _, routing = golden(path)
                torch.manual_seed(0)
                model = hf.load_folder(path)
                L, k = models.routing_shape(model)
                self.assertEqual((L, k), (routing.shape[2], routing.shape[3]))
                t = from_batch(make_batch(ids, routing), L, k)
                before = {n: p.detach().clone() for n, p in model.named_parameters()}
                opt = torch.optim.SGD(model.parameters(), lr=0.05)
                logits = models.forward_replay(model, t.ids, t.routing)
                loss0, _ = sft_loss(logits, t.targets, t.mask)
                logp = token_logprobs(logits, t.targets)
                g_loss, _ = grpo_loss(logp, logp.detach(), t.behaviour, t.advantage, t.mask)
                opt.zero_grad()
                g_loss.backward()
                opt.step()
                with torch.no_grad():
                    loss1, _ = sft_loss(models.forward_replay(model, t.ids, t.routing), t.targets, t.mask)
                self.assertLess(loss1.item(), loss0.item())
                changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
                self.assertIn("model.embed_tokens.weight", changed)
                self.assertTrue(any("self_attn" in n for n in changed))
                if L:
                    self.assertTrue(any(n.endswith("mlp.gate.weight") for n in changed))
                    self.assertTrue(any(".mlp.experts." in n for n in changed))


class FakeBridge:
    """Stands in for the TrainerBridge service: hands out batches made from a fixture's golden
    sequences and records what the trainer publishes and reports."""

    def __init__(self, batches, config_json):
        self.batches_ = batches
        self.published = []
        self.reports = []
        self.config_json = config_json

    def status(self):
        return types.SimpleNamespace(model_config_json=self.config_json, experiment="hf-test", policy_version=0,
                                     teachers=[], datasets=[])

    def batches(self, trainer_version=0, batch_size=0, prefetch=1):
        return iter(self.batches_)

    def publish(self, version, path, model=""):
        self.published.append((version, path))

    def report(self, step, **metrics):
        self.reports.append((step, metrics))

    def close(self):
        pass


class TrainMainTest(unittest.TestCase):
    """train.py's loop on a Hugging Face folder (--init DIR), with the bridge replaced."""

    def test_grpo_steps_publish_hf_folders(self):
        try:
            from flotilla_trainer import train
        except ImportError as e:
            self.skipTest(f"trainer gRPC stubs not built: {e}")
        src = os.path.join(DATA, "deepseek_v3")
        ids, _, _, routing = golden(src)
        batches = []
        for step in range(3):
            b = make_batch(ids, routing)
            b.step = step
            b.stale_masked_tokens = 0
            batches.append(b)
        with open(os.path.join(src, "config.json")) as f:
            bridge = FakeBridge(batches, f.read())
        out = tempfile.mkdtemp()
        try:
            saved = train.BridgeClient, sys.argv
            train.BridgeClient = lambda address: bridge
            sys.argv = ["train", "--bridge", "fake", "--out", out, "--init", src, "--rl-steps", "3",
                        "--lr", "0.01", "--device", "cpu"]
            try:
                train.main()
            finally:
                train.BridgeClient, sys.argv = saved
            self.assertEqual([v for v, _ in bridge.published], [0, 1, 2, 3])
            self.assertEqual(bridge.published[3][1], os.path.join(out, "v3", "model.safetensors"))
            self.assertEqual(len(bridge.reports), 3)
            self.assertEqual(names_and_dtypes(os.path.join(out, "v3")), names_and_dtypes(src))
            first = hf.load_folder(os.path.join(out, "v0")).state_dict()
            last = hf.load_folder(os.path.join(out, "v3")).state_dict()
            self.assertTrue(torch.equal(first["model.norm.weight"], hf.load_folder(src).state_dict()["model.norm.weight"]))
            self.assertFalse(torch.equal(first["model.layers.1.mlp.gate.weight"], last["model.layers.1.mlp.gate.weight"]))
        finally:
            shutil.rmtree(out)


class PublishTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_publish_round_trip(self):
        for src in FIXTURES:
            name = os.path.basename(src)
            with self.subTest(fixture=name):
                ids, want, _, _ = golden(src)
                model = hf.load_folder(src).eval()
                path = models.save(model, os.path.join(self.dir, name), 3)
                self.assertEqual(path, models.publish_path(os.path.join(self.dir, name), 3, model))
                folder = os.path.dirname(path)
                self.assertEqual(names_and_dtypes(folder), names_and_dtypes(src))
                with open(os.path.join(src, "config.json")) as a, open(os.path.join(folder, "config.json")) as b:
                    self.assertEqual(json.load(a), json.load(b))
                back = hf.load_folder(folder).eval()
                lp, _, _ = next_logprobs(back, ids)
                self.assertLessEqual((lp - want).abs().max().item(), TOL)
                other = hf.load_folder(src)
                with torch.no_grad():
                    for p in other.parameters():
                        p.add_(0.01)
                models.restore(other, path)
                self.assertTrue(torch.equal(next_logprobs(other.eval(), ids)[0], lp))

    def test_transposed_fused_experts_read_and_written_back(self):
        from flotilla_trainer.safetensors_io import load_file, save_file
        src = os.path.join(DATA, "qwen3_moe_fused")
        t = load_file(os.path.join(src, "model.safetensors"))
        t = {k: (v.transpose(1, 2).contiguous() if ".experts." in k else v) for k, v in t.items()}
        folder = os.path.join(self.dir, "transposed")
        os.makedirs(folder)
        shutil.copy(os.path.join(src, "config.json"), folder)
        save_file(t, os.path.join(folder, "model.safetensors"))
        ids, want, _, _ = golden(src)
        model = hf.load_folder(folder).eval()
        self.assertLessEqual((next_logprobs(model, ids)[0] - want).abs().max().item(), TOL)
        out = os.path.dirname(models.save(model, self.dir, 1))
        back = load_file(os.path.join(out, "model.safetensors"))
        self.assertEqual(set(back), set(t))
        for k in t:
            self.assertTrue(torch.equal(back[k], t[k]), k)

    def test_random_init_from_config_publishes_what_transformers_saves(self):
        for name in ("qwen3_moe", "qwen3_moe_bf16_sharded", "deepseek_v3_nolora_bf16", "olmoe_f16", "llama3_rope"):
            with self.subTest(fixture=name):
                src = os.path.join(DATA, name)
                with open(os.path.join(src, "config.json")) as f:
                    model = models.build(f.read(), seed=1)
                folder = os.path.dirname(models.save(model, os.path.join(self.dir, name), 0))
                self.assertEqual(names_and_dtypes(folder), names_and_dtypes(src))

    def test_flotilla_format_still_works(self):
        cfg = json.dumps({"vocab_size": 272, "n_layers": 2, "d_model": 32, "n_heads": 2, "n_kv_heads": 2,
                          "head_dim": 16, "n_experts": 4, "top_k": 2, "n_shared_experts": 1, "expert_hidden": 32})
        model = models.build(cfg, seed=2)
        self.assertEqual(models.routing_shape(model), (2, 2))
        path = models.save(model, self.dir, 1)
        self.assertEqual(path, os.path.join(self.dir, "v1.safetensors"))
        back = models.load(path, cfg)
        ids = torch.arange(10)[None]
        self.assertTrue(torch.equal(back(ids)[0], model(ids)[0]))


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.src = os.path.join(DATA, "qwen3_moe")
        for f in os.listdir(self.src):
            shutil.copy(os.path.join(self.src, f), self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def edit_config(self, **kw):
        p = os.path.join(self.dir, "config.json")
        with open(p) as f:
            c = json.load(f)
        c.update(kw)
        with open(p, "w") as f:
            json.dump(c, f)

    def test_unknown_model_type_names_file_and_field(self):
        self.edit_config(model_type="gpt_oss")
        with self.assertRaisesRegex(hf.ConfigError, r"config\.json: model_type: 'gpt_oss' is not supported"):
            hf.load_folder(self.dir)

    def test_unknown_rope_type(self):
        self.edit_config(rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0})
        with self.assertRaisesRegex(hf.ConfigError, r"rope_type: 'longrope' is not supported"):
            hf.load_folder(self.dir)

    def test_mis_shaped_tensor_names_file_and_tensor(self):
        self.edit_config(hidden_size=48)
        with self.assertRaisesRegex(hf.ConfigError, r"model\.safetensors: tensor \S+: shape"):
            hf.load_folder(self.dir)

    def test_missing_tensor_names_it(self):
        from flotilla_trainer.safetensors_io import load_file, save_file
        p = os.path.join(self.dir, "model.safetensors")
        t = load_file(p)
        del t["model.layers.2.self_attn.k_norm.weight"]
        save_file(t, p)
        with self.assertRaisesRegex(hf.ConfigError, r"model\.safetensors: tensor model\.layers\.2\.self_attn\.k_norm\.weight: missing"):
            hf.load_folder(self.dir)

    def test_missing_expert_names_its_tensor(self):
        from flotilla_trainer.safetensors_io import load_file, save_file
        p = os.path.join(self.dir, "model.safetensors")
        t = load_file(p)
        del t["model.layers.2.mlp.experts.3.up_proj.weight"]
        save_file(t, p)
        with self.assertRaisesRegex(hf.ConfigError, r"model\.safetensors: tensor model\.layers\.2\.mlp\.experts\.3\.up_proj\.weight: missing"):
            hf.load_folder(self.dir)

    def test_no_weights(self):
        os.remove(os.path.join(self.dir, "model.safetensors"))
        with self.assertRaisesRegex(hf.ConfigError, "no model.safetensors or model.safetensors.index.json"):
            hf.load_folder(self.dir)


if __name__ == "__main__":
    unittest.main(verbosity=2)
