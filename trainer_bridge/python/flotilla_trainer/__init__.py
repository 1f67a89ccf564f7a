"""Flotilla's PyTorch side: the reference model, tokenizer and safetensors I/O."""
from .model import ModelConfig, Transformer, init_weights, load  # noqa: F401
from .tokenizer import encode, decode, render_conversation  # noqa: F401
