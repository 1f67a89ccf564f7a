"""config.json of a Hugging Face checkpoint folder, read into the fields the modules use.

Families: qwen3_moe, qwen2_moe, mixtral, olmoe, deepseek_v3 (MoE) and dense qwen3, llama.
Every error names the file and the field.
"""
import json

FAMILIES = ("qwen3_moe", "qwen2_moe", "mixtral", "olmoe", "deepseek_v3", "qwen3", "llama")


class ConfigError(ValueError):
    pass


class HFConfig:
    """The parsed config. raw keeps the dict as read (written back unchanged when publishing)."""

    def __init__(self, raw, source="config.json"):
        self.raw = dict(raw)
        self.source = source
        self.family = self._need("model_type", str)
        if self.family not in FAMILIES:
            raise ConfigError(f"{source}: model_type: {self.family!r} is not supported "
                              f"(supported: {', '.join(FAMILIES)})")
        self.vocab_size = self._need("vocab_size", int)
        self.hidden = self._need("hidden_size", int)
        self.n_layers = self._need("num_hidden_layers", int)
        self.n_heads = self._need("num_attention_heads", int)
        self.n_kv_heads = self.get("num_key_value_heads", self.n_heads)
        self.head_dim = self.get("head_dim") or self.hidden // self.n_heads
        self.eps = float(self.get("rms_norm_eps", 1e-6))
        self.tie = bool(self.get("tie_word_embeddings", False))
        self.max_positions = self.get("max_position_embeddings", 4096)
        act = self.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise ConfigError(f"{source}: hidden_act: {act!r} is not supported (silu only)")
        if self.n_heads % max(1, self.n_kv_heads):
            raise ConfigError(f"{source}: num_key_value_heads: {self.n_kv_heads} does not divide "
                              f"num_attention_heads {self.n_heads}")
        self.layer_types = self.get("layer_types") or []
        self.sliding_window = self.get("sliding_window") or 0
        self._moe()
        if self.family == "deepseek_v3":
            self._mla()

    def get(self, key, default=None):
        v = self.raw.get(key, default)
        return default if v is None else v

    def _need(self, key, kind):
        if key not in self.raw or self.raw[key] is None:
            raise ConfigError(f"{self.source}: {key}: missing")
        v = self.raw[key]
        if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise ConfigError(f"{self.source}: {key}: expected a positive integer, got {v!r}")
        if kind is str and not isinstance(v, str):
            raise ConfigError(f"{self.source}: {key}: expected a string, got {v!r}")
        return v

    def _moe(self):
        f = self.family
        self.moe_layers = []
        self.n_experts = self.top_k = self.moe_inter = 0
        self.dense_inter = self.get("intermediate_size", 0)
        self.router = "softmax"
        self.norm_topk = False
        self.shared_inter = 0
        self.shared_gated = False
        self.n_group = self.topk_group = 1
        self.scaling = 1.0
        if f in ("qwen3", "llama"):
            return
        # transformers 5 writes num_experts or num_local_experts depending on the family's version.
        experts_key = "num_experts" if "num_experts" in self.raw else "num_local_experts"
        if f in ("qwen3_moe", "qwen2_moe"):
            self.n_experts = self.get(experts_key, 0)
            self.moe_inter = self._need("moe_intermediate_size", int)
            self.norm_topk = bool(self.get("norm_topk_prob", False))
            step = self.get("decoder_sparse_step", 1)
            only = set(self.get("mlp_only_layers", []))
            self.moe_layers = [i for i in range(self.n_layers)
                               if i not in only and self.n_experts > 0 and (i + 1) % step == 0]
            if f == "qwen2_moe":
                self.shared_inter = self.get("shared_expert_intermediate_size", 0)
                self.shared_gated = True
        elif f in ("mixtral", "olmoe"):
            self.n_experts = self._need(experts_key, int)
            self.moe_inter = self._need("intermediate_size", int)
            self.norm_topk = True if f == "mixtral" else bool(self.get("norm_topk_prob", False))
            self.moe_layers = list(range(self.n_layers))
        elif f == "deepseek_v3":
            self.n_experts = self._need("n_routed_experts", int)
            self.moe_inter = self._need("moe_intermediate_size", int)
            self.norm_topk = bool(self.get("norm_topk_prob", True))
            self.router = "sigmoid_group"
            scoring = self.get("scoring_func", "sigmoid")
            if scoring != "sigmoid":
                raise ConfigError(f"{self.source}: scoring_func: {scoring!r} is not supported (sigmoid)")
            self.n_group = self.get("n_group", 1)
            self.topk_group = self.get("topk_group", 1)
            if self.n_experts % self.n_group or self.topk_group > self.n_group:
                raise ConfigError(f"{self.source}: n_group: {self.n_group} with topk_group "
                                  f"{self.topk_group} does not fit n_routed_experts {self.n_experts}")
            self.scaling = float(self.get("routed_scaling_factor", 1.0))
            self.shared_inter = self.moe_inter * self.get("n_shared_experts", 0)
            first = self.get("first_k_dense_replace", 0)
            freq = self.get("moe_layer_freq", 1)
            self.moe_layers = [i for i in range(self.n_layers) if i >= first and i % freq == 0]
        self.top_k = self._need("num_experts_per_tok", int)
        if self.top_k > self.n_experts:
            raise ConfigError(f"{self.source}: num_experts_per_tok: {self.top_k} > {self.n_experts} experts")

    def _mla(self):
        self.q_lora_rank = self.get("q_lora_rank", 0)
        self.kv_lora_rank = self._need("kv_lora_rank", int)
        self.qk_nope = self._need("qk_nope_head_dim", int)
        self.qk_rope = self._need("qk_rope_head_dim", int)
        self.v_head_dim = self._need("v_head_dim", int)
        self.rope_interleave = bool(self.get("rope_interleave", True))

    def is_moe_layer(self, i):
        return i in self.moe_layers

    def window(self, i):
        """Sliding window of layer i (0: full attention)."""
        if self.layer_types:
            return self.sliding_window if self.layer_types[i] == "sliding_attention" else 0
        if self.family == "mixtral":
            return self.sliding_window
        if self.get("use_sliding_window", False):
            raise ConfigError(f"{self.source}: use_sliding_window: set without layer_types")
        return 0

    def to_json(self):
        return json.dumps(self.raw, indent=2, sort_keys=True)


def read_config(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}")
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON: {e}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return HFConfig(raw, path)
