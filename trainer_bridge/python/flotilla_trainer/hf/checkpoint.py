"""Checkpoint folders as Hugging Face writes them: config.json + model.safetensors, or shards
listed by model.safetensors.index.json. Tensors in BF16, F16 or F32.

Expert layouts, both read and written back as found:
  per expert  {mlp|block_sparse_moe}.experts.N.{gate_proj,up_proj,down_proj}.weight
              (mixtral's original files: block_sparse_moe.experts.N.{w1,w3,w2}.weight)
  fused       mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and mlp.experts.down_proj
              [E, H, I] (transformers 5); the transposed [E, H, 2I] / [E, I, H] form too.
Tensors of layers past num_hidden_layers (DeepSeek-V3's multi-token-prediction layer) are not
used and are written back unchanged. save_folder writes the same names in the dtypes they were
read in, so transformers loads the folder like the original.
"""
import json
import os
import re

import torch

from ..safetensors_io import dtype_name, dtype_of, load_file, read_header, save_file
from .config import ConfigError, HFConfig, read_config
from .model import HFCausalLM, init_weights

_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
_PER_EXPERT = re.compile(r"^model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight$")
_RENAME = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj",
           "gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}


def weight_files(folder):
    """{tensor name: file path} of the folder's safetensors (single file or index)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(index):
        try:
            with open(index) as f:
                wm = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{index}: weight_map: cannot read ({e})")
        return {k: os.path.join(folder, v) for k, v in wm.items()}
    if os.path.exists(single):
        return {k: single for k in read_header(single)[0]}
    raise ConfigError(f"{folder}: no model.safetensors or model.safetensors.index.json")


def _default_layout(c):
    """A model made from a config is written as transformers 5 save_pretrained writes it: one
    tensor per expert (mlp.experts.N.gate_proj.weight); Mixtral as its released files
    (block_sparse_moe.experts.N.w1.weight)."""
    dt = {"bfloat16": "BF16", "float16": "F16"}.get(str(c.get("dtype", c.get("torch_dtype", ""))), "F32")
    mixtral = c.family == "mixtral"
    return {"prefix": {i: "block_sparse_moe" if mixtral else "mlp" for i in range(c.n_layers)},
            "experts": {i: ("per_expert", mixtral) for i in c.moe_layers}, "dtypes": {},
            "default_dtype": dt, "passthrough": {}, "head_in_file": False}


def load_folder(folder, dtype=torch.float32):
    """Reads the folder into an HFCausalLM whose parameters are in dtype. One file is in memory
    at a time; each tensor is copied into its parameter as it is read."""
    c = read_config(os.path.join(folder, "config.json"))
    files = weight_files(folder)
    headers = {path: read_header(path)[0] for path in set(files.values())}
    for name, path in files.items():
        if name not in headers[path]:
            raise ConfigError(f"{path}: tensor {name} listed in the index is not in the file")
    model = HFCausalLM(c, [n for n in files if n.endswith(".bias")])
    layout = _default_layout(c)
    own = model.state_dict()
    done = set()
    deferred = []
    for path in sorted(set(files.values())):
        tensors = load_file(path, {n for n, p in files.items() if p == path})
        for name in sorted(tensors, key=lambda n: not n.endswith("gate_up_proj")):
            _place(c, own, layout, done, deferred, name, tensors[name], path)
        del tensors
    for key, t, src in deferred:
        _fused(c, own, layout, done, key, t, src)
    for key in own:
        if key in done:
            continue
        if ".mlp.experts." in key and all((key, e) in done for e in range(c.n_experts)):
            continue
        where = os.path.join(folder, "model.safetensors.index.json" if len(headers) > 1 else "model.safetensors")
        missing = next((e for e in range(c.n_experts) if (key, e) not in done), 0) if ".mlp.experts." in key else None
        raise ConfigError(f"{where}: tensor {_file_name(key, layout, missing)}: missing")
    model.layout = layout
    return model.to(dtype)


def _place(c, own, layout, done, deferred, name, t, src):
    layout["dtypes"][name] = dtype_name(t.dtype)
    m = _LAYER.match(name)
    if m and int(m.group(1)) >= c.n_layers:
        layout["passthrough"][name] = t
        return
    pe = _PER_EXPERT.match(name)
    if pe:
        i, pref, e, proj = int(pe.group(1)), pe.group(2), int(pe.group(3)), pe.group(4)
        key = f"model.layers.{i}.mlp.experts.{_RENAME.get(proj, proj)}"
        if proj not in _RENAME or key not in own or e >= c.n_experts:
            raise ConfigError(f"{src}: tensor {name}: not part of a {c.family} model")
        dst = own[key][e]
        if tuple(t.shape) != tuple(dst.shape):
            raise ConfigError(f"{src}: tensor {name}: shape {list(t.shape)}, expected {list(dst.shape)}")
        dst.copy_(t.to(dst.dtype))
        layout["prefix"][i] = pref
        layout["experts"][i] = ("per_expert", proj in ("w1", "w2", "w3"))
        done.add((key, e))
        return
    key = name.replace(".block_sparse_moe.", ".mlp.")
    if key != name:
        layout["prefix"][int(m.group(1))] = "block_sparse_moe"
    if key.endswith(".experts.gate_up_proj") or key.endswith(".experts.down_proj"):
        gate_up = key.endswith("gate_up_proj")
        square = c.hidden == (2 * c.moe_inter if gate_up else c.moe_inter)
        other = key.replace("gate_up_proj", "down_proj") if gate_up else key.replace("down_proj", "gate_up_proj")
        if square and other not in done:
            deferred.append((key, t, src))  # a square tensor takes the other one's orientation
        else:
            _fused(c, own, layout, done, key, t, src)
        return
    if key == "lm_head.weight" and c.tie:
        layout["head_in_file"] = True
        return
    if key not in own:
        raise ConfigError(f"{src}: tensor {name}: not part of a {c.family} model")
    if tuple(t.shape) != tuple(own[key].shape):
        raise ConfigError(f"{src}: tensor {name}: shape {list(t.shape)}, expected {list(own[key].shape)}")
    own[key].copy_(t.to(own[key].dtype))
    done.add(key)


def _fused(c, own, layout, done, key, t, src):
    """[E, 2I, H] gate_up_proj (gate rows first) and [E, H, I] down_proj, or both transposed."""
    i = int(_LAYER.match(key).group(1))
    E, H, I = c.n_experts, c.hidden, c.moe_inter
    base = f"model.layers.{i}.mlp.experts."
    known = layout["experts"].get(i)
    known = known[1] if known is not None and known[0] == "fused" else None
    if key.endswith("gate_up_proj"):
        if H == 2 * I and known is not None and tuple(t.shape) == (E, H, H):
            transposed = known
            t = t.transpose(1, 2) if known else t
        elif tuple(t.shape) == (E, 2 * I, H):
            transposed = False
        elif tuple(t.shape) == (E, H, 2 * I):
            transposed, t = True, t.transpose(1, 2)
        else:
            raise ConfigError(f"{src}: tensor {_file_name(key, layout)}: shape {list(t.shape)}, expected {[E, 2 * I, H]}")
        own[base + "gate_proj"].copy_(t[:, :I])
        own[base + "up_proj"].copy_(t[:, I:])
        done.update({base + "gate_proj", base + "up_proj", key})
    else:
        if H == I and known is not None and tuple(t.shape) == (E, H, H):
            transposed = known
        elif tuple(t.shape) == (E, H, I):
            transposed = False
        elif tuple(t.shape) == (E, I, H):
            transposed = True
        else:
            raise ConfigError(f"{src}: tensor {_file_name(key, layout)}: shape {list(t.shape)}, expected {[E, H, I]}")
        own[base + "down_proj"].copy_(t.transpose(1, 2) if transposed else t)
        done.add(base + "down_proj")
    layout["experts"][i] = ("fused", transposed)


def _file_name(key, layout, expert=None):
    """The checkpoint's name of a parameter (expert: that expert's tensor in a per-expert file)."""
    m = _LAYER.match(key)
    i = int(m.group(1)) if m else -1
    if expert is not None and layout["experts"].get(i, ("fused",))[0] == "per_expert":
        base, proj = key.rsplit(".", 1)
        if layout["experts"][i][1]:
            proj = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}[proj]
        key = f"{base}.{expert}.{proj}.weight"
    if layout["prefix"].get(i) == "block_sparse_moe":
        return key.replace(".mlp.", ".block_sparse_moe.")
    return key


def hf_state(model):
    """The model's tensors under the checkpoint's names, layouts and dtypes (detached, CPU)."""
    c, layout = model.c, model.layout or _default_layout(model.c)
    out = {}
    for key, t in model.state_dict().items():
        t = t.detach().cpu()
        m = _LAYER.match(key)
        i = int(m.group(1)) if m else -1
        name = _file_name(key, layout)
        if ".mlp.experts." in key:
            kind, flag = layout["experts"].get(i, ("fused", False))
            proj = key.rsplit(".", 1)[1]
            if kind == "per_expert":
                short = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}[proj] if flag else proj
                base = name.rsplit(".", 1)[0]
                for e in range(c.n_experts):
                    out[f"{base}.{e}.{short}.weight"] = t[e].clone()
                continue
            if proj == "up_proj":
                continue
            if proj == "gate_proj":
                t = torch.cat([t, model.state_dict()[key.replace("gate_proj", "up_proj")].cpu()], dim=1)
                name = name.replace("gate_proj", "gate_up_proj")
            out[name] = t.transpose(1, 2).contiguous() if flag else t
            continue
        out[name] = t
    if layout["head_in_file"]:
        out["lm_head.weight"] = model.model.embed_tokens.weight.detach().cpu()
    for name in out:
        out[name] = out[name].to(dtype_of(layout["dtypes"].get(name, layout["default_dtype"])))
    out.update(layout["passthrough"])
    return out


def save_folder(model, folder, max_shard_bytes=4 << 30):
    """Writes config.json + model.safetensors (or shards and an index) that transformers loads.
    Returns the path to give the engine's hot swap: model.safetensors or the index."""
    os.makedirs(folder, exist_ok=True)
    state = hf_state(model)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(model.c.to_json())
    sizes = {k: v.numel() * v.element_size() for k, v in state.items()}
    if sum(sizes.values()) <= max_shard_bytes:
        path = os.path.join(folder, "model.safetensors")
        save_file(state, path + ".tmp", metadata={"format": "pt"})
        os.replace(path + ".tmp", path)
        return path
    shards, cur, size = [], {}, 0
    for k in sorted(state):
        if cur and size + sizes[k] > max_shard_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = state[k]
        size += sizes[k]
    shards.append(cur)
    weight_map = {}
    for n, shard in enumerate(shards):
        fname = f"model-{n + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(folder, fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in shard})
    path = os.path.join(folder, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump({"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map}, f, indent=2)
    return path


def new_model(config_json, seed=0, source="config.json"):
    """A random-init model from config.json text (layout: transformers 5, the config's dtype)."""
    c = HFConfig(json.loads(config_json), source)
    return init_weights(HFCausalLM(c), seed=seed)
