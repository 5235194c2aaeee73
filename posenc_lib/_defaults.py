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

__all__ = ["LAYER_DEFAULTS", "MODEL_DEFAULTS", "MODEL_DEFAULTS_5_CHANGED"]

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
    # the rest of the rotary causal-LM types of transformers 4.57.6 whose class
    # fills in one of these fields (``tests/test_class_defaults.py`` reads every
    # such class: a config that omits the field must read as the class reads it),
    # but those the conformance sweep finds the library wrong on: a type listed
    # here is one the library claims to read (``conformance.claimed``)
    "apertus": {"rope_theta": 12000000.0,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                 "original_max_position_embeddings": 8192,
                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0}},
    "arcee": {"rope_theta": 10000.0},
    "aria_text": {"rope_theta": 10000.0}, "bitnet": {"rope_theta": 500000.0},
    "code_llama": {"rope_theta": 10000.0}, "diffllama": {"rope_theta": 10000.0},
    "doge": {"rope_theta": 10000.0}, "ernie4_5_moe": {"rope_theta": 500000.0},
    "flex_olmo": {"rope_theta": 500000.0},
    "gemma3n_text": {"rope_theta": 1000000.0, "head_dim": 256},
    "gpt_oss": {"rope_theta": 150000.0, "head_dim": 64,
                "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                 "beta_slow": 1.0, "truncate": False,
                                 "original_max_position_embeddings": 4096}},
    "granitemoe": {"rope_theta": 10000.0},
    "granitemoeshared": {"rope_theta": 10000.0},
    "helium": {"rope_theta": 100000.0, "head_dim": 128},
    "llama4_text": {"rope_theta": 500000, "head_dim": 128},
    "minimax": {"rope_theta": 1000000.0}, "ministral": {"rope_theta": 10000.0},
    "moshi": {"rope_theta": 10000.0},
    "nemotron": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "olmoe": {"rope_theta": 10000.0}, "open-llama": {"rope_theta": 10000.0},
    "phimoe": {"rope_theta": 1000000.0},
    "vaultgemma": {"rope_theta": 10000.0, "head_dim": 256},
    "gpt_neox_japanese": {"rotary_emb_base": 10000, "rotary_pct": 1.0},
    # types only transformers 5.x registers: the defaults of their classes at
    # 5.24.0 (``rope_parameters`` split into the 4.x fields; the stored
    # ``results/class-defaults-5.json`` and ``tests/test_class_defaults.py``)
    "apertus1p5_text": {"rope_theta": 12000000.0,
                        "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                         "original_max_position_embeddings": 8192,
                                         "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0}},
    "axk1": {"rope_theta": 10000.0, "head_dim": 64},
    "cwm": {"rope_theta": 1000000.0, "head_dim": 128,
            "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                             "original_max_position_embeddings": 8192,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0}},
    "exaone": {"rope_theta": 500000.0, "head_dim": 128},
    "glm4_moe_lite": {"rope_theta": 10000.0, "qk_rope_head_dim": 64},
    "granite_swa": {"rope_theta": 10000.0}, "granitemoe_swa": {"rope_theta": 10000.0},
    "hy_v3": {"rope_theta": 11158840.0, "head_dim": 128},
    "hyperclovax": {"rope_theta": 10000.0, "head_dim": 128},
    "internlm3": {"rope_theta": 10000.0, "head_dim": 128},
    "iquestcoder": {"rope_theta": 10000.0, "head_dim": 128},
    "jais2": {"rope_theta": 10000.0, "head_dim": 128},
    "minicpm3": {"rope_theta": 10000.0, "head_dim": 32},
    "minimax_m2": {"rope_theta": 5000000.0, "head_dim": 128},
    "ministral3": {"rope_theta": 1000000.0, "head_dim": 128,
                   "rope_scaling": {"rope_type": "yarn", "factor": 16.0,
                                    "original_max_position_embeddings": 16384,
                                    "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                    "mscale_all_dim": 1.0,
                                    "llama_4_scaling_beta": 0.1}},
    "nanochat": {"rope_theta": 10000.0}, "olmo_hybrid": {"rope_theta": 10000.0},
    "qwen3_5_moe_text": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                         "head_dim": 256},
    "qwen3_5_text": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                     "head_dim": 256},
    # Qwen4ExpTextConfig (5.24.0): head_dim a field of its own, 256, never
    # hidden_size / heads (results/class-defaults-5.json)
    "qwen4_exp_text": {"rope_theta": 10000.0, "head_dim": 256},
    # HrmTextConfig (5.24.0): head_dim a field of its own, 128 (a layer's
    # config carries the type without its _text: "hrm", filled in below)
    "hrm_text": {"rope_theta": 10000.0, "head_dim": 128},
    # Zamba2Config: rope_theta 10,000 (4.57.6's keyword; 5.x's default base),
    # used only with use_mem_rope
    "zamba2": {"rope_theta": 10000.0},
    # Phi4MultimodalConfig (4.57.6 and 5.24.0): Phi-3's text model
    "phi4_multimodal": {"rope_theta": 10000.0, "partial_rotary_factor": 1.0},
    # ZayaConfig (5.24.0): head_dim 128, not hidden_size / heads (256); its
    # bases are per layer type (PER_TYPE_ROPE_DEFAULTS has none: a config
    # without rope_parameters is refused)
    "zaya": {"head_dim": 128},
    # DoryConfig (5.24.0): head_dim 256 (hidden_size / heads is 160)
    "dory": {"head_dim": 256},
    "sarvam_mla": {"rope_theta": 10000.0, "head_dim": 64},
    "sarvam_moe": {"rope_theta": 8000000.0, "head_dim": 64},
    "solar_open": {"rope_theta": 1000000.0, "head_dim": 128},
    "youtu": {"rope_theta": 10000.0, "head_dim": 64},
    # 5.24.0 classes the conformance sweep now agrees on (their defaults,
    # results/class-defaults-5.json; JetMoE's head is kv_channels, 128)
    "afmoe": {"rope_theta": 10000.0, "head_dim": 128},
    "axk2": {"rope_theta": 10000.0, "qk_rope_head_dim": 32},
    "exaone_moe": {"rope_theta": 10000.0},
    "glm_moe_dsa": {"rope_theta": 10000.0, "qk_rope_head_dim": 64},
    "hy_v4": {"rope_theta": 10000.0, "qk_rope_head_dim": 64},
    "jetmoe": {"rope_theta": 10000.0},
    "minimax_m3_vl_text": {"rope_theta": 5000000.0, "head_dim": 128},
    "flint": {"rope_theta": 10000.0, "head_dim": 128},
    "kolibri1": {"rope_theta": 10000.0, "head_dim": 128},
    "lara_mini": {"rope_theta": 10000.0, "head_dim": 128},
    "falcon_h1": {"rope_theta": 100000.0},
    # classes the sweep builds since it sets the sizes their defaults lack
    # (posenc_lib.tools.tiny_model.SPECIAL): their defaults, 4.57.6 where it
    # has the class, else 5.24.0's (results/class-defaults-5.json)
    "bamba": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "dots1": {"rope_theta": 10000.0}, "lfm2_moe": {"rope_theta": 1000000.0},
    "longcat_flash": {"rope_theta": 10000000.0, "qk_rope_head_dim": 64},
    # RecurrentGemmaConfig (4.57.6; 5.24.0 sets the same factor "for BC")
    "recurrent_gemma": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
}

# A composite's text model runs its ``_text`` class (Qwen3.5's text_config is a
# Qwen3_5TextConfig), and the library strips the suffix from a text model's
# type before reading per layer: both names get the text class's defaults.
MODEL_DEFAULTS.update({name.removesuffix("_text"): fields
                       for name, fields in list(MODEL_DEFAULTS.items())
                       if name.endswith("_text")
                       and name.removesuffix("_text") not in MODEL_DEFAULTS})

#: The entries of :data:`MODEL_DEFAULTS` whose config class fills in another
#: value in transformers 5.24.0 than in 4.57.6 (``MODEL_DEFAULTS`` holds
#: 4.57.6's where the class exists there): the ``default_theta`` of
#: ``CohereConfig``, ``Olmo3Config`` and ``PersimmonConfig`` in
#: ``models/*/configuration_*.py`` of huggingface/transformers v5.24.0, and
#: ``FalconH1Config``, which names no base there and so gets
#: ``PreTrainedConfig``'s 10,000 (4.57.6: 100,000).
#: ``tests/test_class_defaults.py`` rebuilds the table from both releases'
#: classes (4.57.6 live, 5.24.0 from ``results/class-defaults-5.json``).
MODEL_DEFAULTS_5_CHANGED: dict[str, dict[str, Any]] = {
    "cohere": {"rope_theta": 500000.0}, "falcon_h1": {"rope_theta": 10000.0},
    "olmo3": {"rope_theta": 500000.0}, "persimmon": {"rope_theta": 10000.0},
}

#: The config class defaults (transformers 4.57.6, ``__init__`` signatures) of
#: the fields that decide the layer layout; ``tests/test_per_layer.py`` checks
#: each. ``sliding_window_pattern`` and ``full_attention_interval`` are read
#: from ``kwargs`` by their classes (default written in the class body).
LAYER_DEFAULTS: dict[str, dict[str, Any]] = {
    "recurrent_gemma": {"num_hidden_layers": 26, "attention_window_size": 2048},
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
    "qwen3_moe": {"num_hidden_layers": 24, "sliding_window": 4096,
                  "use_sliding_window": False},
    "mistral": {"num_hidden_layers": 32, "sliding_window": 4096},
    "lfm2": {"num_hidden_layers": 32, "full_attn_idxs": None},
    # the classes whose layer_types per_layer._PATTERNS expands (4.57.6 where
    # the class exists there, else 5.24.0's results/class-defaults-5.json)
    "gemma3n": {"num_hidden_layers": 35, "sliding_window": 512},
    "vaultgemma": {"num_hidden_layers": 26, "sliding_window": 4096},
    "minimax": {"num_hidden_layers": 32, "sliding_window": None},
    "ministral": {"num_hidden_layers": 32, "sliding_window": 4096},
    "modernbert-decoder": {"num_hidden_layers": 22, "global_attn_every_n_layers": 3},
    "afmoe": {"num_hidden_layers": 32, "sliding_window": 1024,
              "global_attn_every_n_layers": 4},
    "bailing_hybrid": {"num_hidden_layers": 42, "layer_group_size": 6},
    "qwen3_5": {"num_hidden_layers": 32}, "qwen3_5_moe": {"num_hidden_layers": 40},
    "cwm": {"num_hidden_layers": 64, "sliding_window": 8192},
    "granite_swa": {"num_hidden_layers": 24, "sliding_window": 128},
    "granitemoe_swa": {"num_hidden_layers": 32, "sliding_window": 128},
    "flint": {"num_hidden_layers": 49, "sliding_window": 513},
    "mimo_v2_flash": {"num_hidden_layers": 48, "sliding_window": 129},
    "lfm3": {"num_hidden_layers": 24, "sliding_window": 256},
    "lara_mini": {"num_hidden_layers": 34, "sliding_window": 512},
    "axk2": {"num_hidden_layers": 48}, "glm_moe_dsa": {"num_hidden_layers": 78},
    "hy_v4": {"num_hidden_layers": 34},
    "zaya": {"num_hidden_layers": 40, "sliding_window": None},
    "cohere2_moe": {"num_hidden_layers": 40, "sliding_window": 4096,
                    "sliding_window_pattern": 4,
                    "prefix_dense_sliding_window_pattern": 1},
    "olmo_hybrid": {"num_hidden_layers": 32},
    "beam": {"num_hidden_layers": 52, "sliding_window": 512},
    "exaone_moe": {"num_hidden_layers": 32, "sliding_window": 4096,
                   "sliding_window_pattern": 4},
    "kolibri1": {"num_hidden_layers": 50, "sliding_window": 513},
    "dots1": {"num_hidden_layers": 62, "sliding_window": 4096, "max_window_layers": 62},
    "gemma4": {"num_hidden_layers": 30, "sliding_window": 512},
    "gemma4_unified": {"num_hidden_layers": 30, "sliding_window": 1024},
    # DoryConfig: 36 layers before the saved form's doubling (config_reader's
    # _dory_fields halves a saved form)
    "dory": {"sliding_window": 1024},
    # Inkling's text classes (their window has its own name; sliding_window
    # is an alias of it, and wins where both are given)
    "inkling": {"num_hidden_layers": 66, "sliding_window_size": 512},
    "inkling2": {"num_hidden_layers": 48, "sliding_window_size": 1024},
    "inkling2_loop": {"num_hidden_layers": 24, "sliding_window_size": 1024},
}
