"""The defaults transformers' config classes fill in for the fields that fix a
model's positions: :data:`MODEL_DEFAULTS` (the rotary frequencies) and
:data:`LAYER_DEFAULTS` (the layer layout).

Data only, no imports from posenc_lib: it sits in the base layer, below both
the config reader and the validator, because both read it.
:mod:`posenc_lib.config_reader` (``MODEL_DEFAULTS``) and
:mod:`posenc_lib.per_layer` (``LAYER_DEFAULTS``) fill in a missing field from
it, and ``posenc_lib._validate_config`` refuses an explicit null for a field
the class has a default for (``rope_theta``, ``rope_local_base_freq``). The
two tables are the same objects under their old names
(``config_reader.MODEL_DEFAULTS``, ``per_layer.LAYER_DEFAULTS``); reading them
here keeps the validator from importing its own users (the reader and the
numerics), which was an import cycle.

(``KV_HEADS_DEFAULTS``, which only the validator's users read, stays in
``posenc_lib._validate_config``.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAYER_DEFAULTS", "MODEL_DEFAULTS"]

#: Fields that fix the rotary frequencies, as a config class fills them in when
#: ``config.json`` omits them (the defaults of its ``__init__``;
#: ``tests/test_models.py`` checks each against transformers 4.57.6). Lengths are
#: left out, so that a missing length is reported rather than guessed, except
#: where a model's published ``config.json`` relies on its class's default:
#: Gemma 3's ``text_config`` has no ``max_position_embeddings``, and
#: ``Gemma3TextConfig`` fills in 131,072.
#: For a model_type not listed here, a missing ``rope_theta`` is an error, and a
#: missing ``partial_rotary_factor`` / ``head_dim`` means 1.0 / hidden_size //
#: num_attention_heads, the fallbacks of transformers' rotary code.
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"rope_theta": 10000.0}, "mistral": {"rope_theta": 10000.0},
    "mixtral": {"rope_theta": 1000000.0}, "qwen2": {"rope_theta": 10000.0},
    "qwen2_vl": {"rope_theta": 1000000.0}, "qwen2_5_vl": {"rope_theta": 1000000.0},
    "gemma": {"rope_theta": 10000.0, "head_dim": 256},
    "gemma2": {"rope_theta": 10000.0, "head_dim": 256},
    "phi3": {"rope_theta": 10000.0, "partial_rotary_factor": 1.0},
    "gpt_neox": {"rotary_emb_base": 10000, "rotary_pct": 0.25},
    "deepseek_v3": {"rope_theta": 10000.0, "qk_rope_head_dim": 64},
    "deepseek_v2": {"rope_theta": 10000.0, "qk_rope_head_dim": 64},
    "gemma3": {"rope_theta": 1000000.0, "head_dim": 256,  # the global layers
               "max_position_embeddings": 131072},
    "gemma3_text": {"rope_theta": 1000000.0, "head_dim": 256,
                    "max_position_embeddings": 131072},
    "qwen2_moe": {"rope_theta": 10000.0},
    "qwen3": {"rope_theta": 10000.0, "head_dim": 128},
    "qwen3_moe": {"rope_theta": 10000.0},
    "llama4": {"rope_theta": 500000, "head_dim": 128},
    "phi": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "stablelm": {"rope_theta": 10000, "partial_rotary_factor": 0.25},
    "persimmon": {"rope_theta": 25000.0, "partial_rotary_factor": 0.5},
    "glm": {"rope_theta": 10000.0, "head_dim": 128, "partial_rotary_factor": 0.5},
    "glm4": {"rope_theta": 10000.0, "head_dim": 128, "partial_rotary_factor": 0.5},
    "starcoder2": {"rope_theta": 10000.0}, "olmo": {"rope_theta": 10000.0},
    "olmo2": {"rope_theta": 10000.0}, "cohere": {"rope_theta": 10000.0},
    "granite": {"rope_theta": 10000.0}, "falcon": {"rope_theta": 10000.0},
    "smollm3": {"rope_theta": 2000000.0},
    "olmo3": {"rope_theta": 10000.0},
    "qwen3_next": {"rope_theta": 10000.0, "head_dim": 256,
                   "partial_rotary_factor": 0.25},
    "ernie4_5": {"rope_theta": 500000.0, "head_dim": 128},
    "glm4_moe": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "seed_oss": {"rope_theta": 10000.0, "head_dim": 128},
    "cohere2": {"rope_theta": 10000.0},
    "hunyuan_v1_dense": {"rope_theta": 10000.0},
    "hunyuan_v1_moe": {"rope_theta": 10000.0},
    "lfm2": {"rope_theta": 1000000.0}, "exaone4": {"rope_theta": 10000.0},
    "gemma3n": {"rope_theta": 1000000.0, "head_dim": 256},
}

#: The config class defaults (transformers 4.57.6, ``__init__`` signatures) of
#: the fields that decide the layer layout; ``tests/test_per_layer.py`` checks
#: each. ``sliding_window_pattern`` and ``full_attention_interval`` are read
#: from ``kwargs`` by their classes (default written in the class body).
LAYER_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": {"num_hidden_layers": 26, "sliding_window": 4096},
    "gemma3": {"num_hidden_layers": 26, "sliding_window": 4096,
               "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0},
    "cohere2": {"num_hidden_layers": 40, "sliding_window": 4096,
                "sliding_window_pattern": 4},
    "exaone4": {"num_hidden_layers": 32, "sliding_window": 4096,
                "sliding_window_pattern": 4},
    "olmo3": {"num_hidden_layers": 32, "sliding_window": 4096},
    "gpt_oss": {"num_hidden_layers": 36, "sliding_window": 128},
    "qwen3_next": {"num_hidden_layers": 48, "full_attention_interval": 4},
    "llama4": {"num_hidden_layers": 48, "no_rope_layer_interval": 4,
               "attn_temperature_tuning": True, "floor_scale": 8192,
               "attn_scale": 0.1, "attention_chunk_size": 8192},
    "smollm3": {"num_hidden_layers": 36, "no_rope_layer_interval": 4,
                "use_sliding_window": False, "sliding_window": None},
    "qwen2": {"num_hidden_layers": 32, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28},
    "qwen3": {"num_hidden_layers": 32, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28},
    "qwen2_moe": {"num_hidden_layers": 24, "sliding_window": 4096,
                  "use_sliding_window": False, "max_window_layers": 28},
    "mistral": {"num_hidden_layers": 32, "sliding_window": 4096},
    "lfm2": {"num_hidden_layers": 32, "full_attn_idxs": None},
}
