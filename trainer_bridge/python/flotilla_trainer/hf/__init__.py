"""Hugging Face checkpoint folders in the trainer: own modules for qwen3_moe, qwen2_moe, mixtral,
olmoe, deepseek_v3, qwen3 and llama (no transformers needed), read and written in HF layout."""
from .checkpoint import hf_state, load_folder, new_model, save_folder, weight_files  # noqa: F401
from .config import ConfigError, HFConfig, read_config  # noqa: F401
from .model import HFCausalLM, init_weights  # noqa: F401
