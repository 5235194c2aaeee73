"""Tiny models built with transformers' own classes (hidden size 64, a few
layers, random weights, no download), and the per-layer comparison with
``rope_from_config(config, layer=i)``.

Shared by tests/test_per_layer.py, tests/test_v5_and_ledger.py and
tests/test_kv_cache.py; tests/test_per_layer.py says what is compared.
"""

from __future__ import annotations

import copy
import warnings

import torch
from transformers import AutoModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.utils import logging as hf_logging

from helpers.hf_reference import assert_same
from posenc_lib import per_layer, scaling
from posenc_lib import config_reader

TINY = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "intermediate_size": 32, "vocab_size": 16, "pad_token_id": 0}
#: What each model type needs beyond TINY to build at this size.
EXTRA = {"llama4": {"intermediate_size_mlp": 32, "num_local_experts": 2},
         "qwen3_next": {"num_experts": 2, "moe_intermediate_size": 16,
                        "shared_expert_intermediate_size": 16, "linear_num_key_heads": 2,
                        "linear_num_value_heads": 2, "linear_key_head_dim": 16,
                        "linear_value_head_dim": 16},
         "gpt_oss": {"num_local_experts": 2}}
CLASS_TYPE = {"gemma3": "gemma3_text", "llama4": "llama4_text",
              "qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
              **config_reader.MODEL_TYPE_ALIASES}  # Kimi K2, DeepSeek-V3.2: DeepseekV3


def tiny_model(config: dict):
    d = copy.deepcopy(config)
    model_type = d.pop("model_type")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # Qwen3-Next: no fast kernels installed
    try:
        built = CONFIG_MAPPING[CLASS_TYPE.get(model_type, model_type)](**d)
        torch.manual_seed(0)
        return AutoModel.from_config(built), built
    finally:
        hf_logging.set_verbosity(verbosity)


def hf_layers(model) -> list:
    """Per layer: (rotary module, attention module) the forward pass uses,
    the module ``None`` where the layer applies no RoPE."""
    out = []
    for layer in model.layers:
        attn = getattr(layer, "self_attn", getattr(layer, "attention", None))
        if attn is None or not getattr(attn, "use_rope", 1):
            out.append((None, attn))
        elif type(attn).__name__ == "Cohere2Attention" and attn.sliding_window is None:
            out.append((None, attn))  # its forward: RoPE if sliding_window is not None
        elif type(attn).__name__ == "Exaone4Attention" and not (
                attn.sliding_window is None or attn.is_sliding):
            out.append((None, attn))  # its forward: sliding_window is None or is_sliding
        elif hasattr(model, "rotary_embs"):  # OLMo 3
            out.append((model.rotary_embs[attn.attention_type], attn))
        elif getattr(attn, "is_sliding", False) and hasattr(model, "rotary_emb_local"):
            out.append((model.rotary_emb_local, attn))
        else:
            out.append((model.rotary_emb, attn))
    return out


def check_every_layer(config: dict, ours: dict | None = None) -> list:
    """Build ``config`` with transformers and compare every layer with
    ``rope_from_config(ours, layer=i)`` (``ours`` defaults to ``config``)."""
    ours = config if ours is None else ours
    model, built = tiny_model(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        layout = per_layer.layer_layout(ours)
        if getattr(built, "layer_types", None) is not None:
            assert [x.attention for x in layout] == list(built.layer_types)
        assert len(layout) == built.num_hidden_layers
        for i, (module, attn) in enumerate(hf_layers(model)):
            got = scaling.rope_from_config(ours, layer=i, dtype=torch.float64)
            if module is None:
                assert got is None, (config["model_type"], i)
                assert layout[i].rope is None
            else:
                assert_same(got, (module.inv_freq, float(module.attention_scaling)),
                            f"{config['model_type']} layer {i}")
            if attn is not None and getattr(attn, "sliding_window", None):
                # EXAONE 4 keeps the config's window on every layer and passes
                # it to the kernel only where is_sliding
                sliding = getattr(attn, "is_sliding", True)
                assert layout[i].window == (attn.sliding_window if sliding else None)
            if attn is not None and getattr(attn, "attn_temperature_tuning", False) \
                    and not attn.use_rope:
                assert layout[i].temperature == {"attn_scale": attn.attn_scale,
                                                 "floor_scale": attn.floor_scale}
    return layout


GEMMA3 = {"model_type": "gemma3", **TINY, "num_hidden_layers": 12,
          "sliding_window": 16, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "max_position_embeddings": 131072}
OLMO3 = {"model_type": "olmo3", **TINY, "num_hidden_layers": 8, "sliding_window": 16,
         "rope_theta": 5e5, "max_position_embeddings": 65536,
         "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "attention_factor": 1.2,
                          "beta_fast": 32.0, "beta_slow": 1.0,
                          "original_max_position_embeddings": 8192}}
LLAMA4 = {"model_type": "llama4", **TINY, **EXTRA["llama4"], "num_hidden_layers": 8,
          "rope_theta": 5e5, "max_position_embeddings": 262144,
          "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                           "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                           "original_max_position_embeddings": 8192}}
