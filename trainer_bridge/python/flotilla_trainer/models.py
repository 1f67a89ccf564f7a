"""The trainer's view of a policy model, whatever its format.

Two kinds share one interface (model(ids, routing=None) -> (logits, routing_used [B,T,L,k]) and
model.routing_shape() -> (L, k)):
  Flotilla's own format   a JSON config without model_type; weights in one safetensors file with
                          the engine's names (flotilla_trainer.model).
  Hugging Face folders    config.json with model_type (qwen3_moe, qwen2_moe, mixtral, olmoe,
                          deepseek_v3, qwen3, llama); flotilla_trainer.hf.
Publishing writes what the engine's hot swap reads: for Flotilla's format DIR/vN.safetensors; for
a Hugging Face model the folder DIR/vN/ (config.json + model.safetensors, names and dtypes as
loaded), which transformers loads too; the path handed to the engine is its model.safetensors
(or model.safetensors.index.json when sharded).
"""
import json
import os
import shutil

import torch

from . import hf
from .model import ModelConfig, Transformer, init_weights
from .safetensors_io import load_file, save_file


def forward_replay(model, ids, replay):
    """Forward pass with routing replay: generated positions use the engine's experts, prompt
    and padding positions (rows of -1) use the trainer's router. Returns logits."""
    if replay is None:
        return model(ids)[0]
    with torch.no_grad():
        _, used = model(ids)
    routing = torch.where(replay >= 0, replay, used)
    return model(ids, routing)[0]


def is_hf_config(text):
    try:
        d = json.loads(text)
    except ValueError:
        return False
    return isinstance(d, dict) and "model_type" in d


def is_hf_folder(path):
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json"))


def build(config_text, seed=0, source="model config"):
    """A random-init model from a config JSON text of either kind."""
    if is_hf_config(config_text):
        return hf.new_model(config_text, seed=seed, source=source)
    return init_weights(Transformer(ModelConfig.from_json(config_text)), seed=seed)


def load(path, config_text=None):
    """A Hugging Face folder, or a Flotilla safetensors file (with config_text)."""
    if is_hf_folder(path):
        return hf.load_folder(path)
    model = Transformer(ModelConfig.from_json(config_text))
    model.import_state(load_file(path))
    return model


def routing_shape(model):
    return model.routing_shape()


def publish_path(out_dir, version, model):
    if isinstance(model, hf.HFCausalLM):
        folder = os.path.join(out_dir, f"v{version}")
        index = os.path.join(folder, "model.safetensors.index.json")
        return index if os.path.exists(index) else os.path.join(folder, "model.safetensors")
    return os.path.join(out_dir, f"v{version}.safetensors")


def save(model, out_dir, version):
    """Writes version `version` of the weights; returns the path for the engine's hot swap."""
    if isinstance(model, hf.HFCausalLM):
        folder = os.path.join(out_dir, f"v{version}")
        tmp = folder + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        path = hf.save_folder(model, tmp)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        return os.path.join(folder, os.path.basename(path))
    path = os.path.join(out_dir, f"v{version}.safetensors")
    save_file({k: v.float().cpu() for k, v in model.export_state().items()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def restore(model, path):
    """Loads published weights (a path save returned) back into model."""
    if isinstance(model, hf.HFCausalLM):
        loaded = hf.load_folder(os.path.dirname(path))
        with torch.no_grad():
            model.load_state_dict(loaded.state_dict())
        model.layout = loaded.layout
        return
    model.import_state(load_file(path))


def remove(out_dir, version, model):
    if isinstance(model, hf.HFCausalLM):
        shutil.rmtree(os.path.join(out_dir, f"v{version}"), ignore_errors=True)
    else:
        p = os.path.join(out_dir, f"v{version}.safetensors")
        if os.path.exists(p):
            os.remove(p)
