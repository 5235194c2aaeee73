"""transformers' own side of a comparison: its config object, its
``ROPE_INIT_FUNCTIONS``, its models' rotary modules (transformers 4.57.6).

Shared by tests/test_models.py, tests/test_per_layer.py and
tests/test_config_sweep.py. transformers computes in float32, where ``base**x``
loses about ``ln(base)·ε32`` of relative precision, hence ``assert_same``'s
tolerance of ``32·ε32`` (tests/test_models.py explains it).
"""

from __future__ import annotations

import copy
import importlib
import math

import torch
from transformers import AutoConfig
from transformers.configuration_utils import PretrainedConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from posenc_lib import config_reader

EPS32 = torch.finfo(torch.float32).eps
EPS64 = torch.finfo(torch.float64).eps


def hf_config(config: dict) -> PretrainedConfig:
    """transformers' config object for a config.json dict (its own class), text part."""
    d = copy.deepcopy(config)
    model_type = d.pop("model_type", "llama")
    # Kimi K2 and DeepSeek-V3.2 have no 4.57 class; they run DeepSeek-V3's
    model_type = config_reader.MODEL_TYPE_ALIASES.get(model_type, model_type)
    built = AutoConfig.for_model(model_type, **d)
    return built.get_text_config()


def hf_rope_type(config: PretrainedConfig) -> str:
    scaling_ = getattr(config, "rope_scaling", None)
    if isinstance(scaling_, dict):
        return scaling_.get("rope_type", scaling_.get("type")) or "default"
    return "default"


def hf_rope(config: dict, seq_len=None) -> tuple[torch.Tensor, float]:
    text = hf_config(config)
    inv_freq, factor = ROPE_INIT_FUNCTIONS[hf_rope_type(text)](text, "cpu",
                                                               seq_len=seq_len)
    return inv_freq.double(), float(factor)


def rotary_module(config: dict):
    """The model's own rotary-embedding module, built from the config object."""
    text = hf_config(config)
    module = importlib.import_module(
        f"transformers.models.{text.model_type.removesuffix('_text')}."
        f"modeling_{text.model_type.removesuffix('_text')}")
    classes = [getattr(module, n) for n in dir(module)
               if n.endswith("RotaryEmbedding") and "Vision" not in n]
    assert len(classes) == 1, classes
    return classes[0](text)


def assert_same(ours, theirs, message=""):
    (a, fa), (b, fb) = ours, theirs
    assert a.shape == b.shape, message
    assert torch.allclose(a.double(), b.double(), rtol=32 * EPS32, atol=0), message
    assert math.isclose(fa, fb, rel_tol=8 * EPS64), message


def hf_pair_partner(config: dict) -> int:
    """The feature that forms a rotary pair with feature 0 in transformers: with
    one-hot queries at position 1 and keys at position 0, rotated by the
    model's own rotary module and apply function, query e_0 scores non-zero
    against e_0 (cos) and its partner (sin) only."""
    text = hf_config(config)
    model_type = config_reader.MODEL_TYPE_ALIASES.get(config["model_type"],
                                                config["model_type"])
    module = importlib.import_module(
        f"transformers.models.{model_type}.modeling_{model_type}")
    ids = torch.tensor([[0, 1]])
    mrope = getattr(text, "rope_scaling", None) or {}
    if "mrope_section" in mrope:  # the same position on every axis
        ids = ids[None].expand(3, 1, 2)
    rotary = rotary_module(config)
    d = 2 * rotary.inv_freq.numel()  # gpt-oss's cos holds each angle once, d / 2
    eye = torch.eye(d)[None, :, None, :].expand(1, d, 2, d)  # head j holds e_j
    if model_type == "llama4":  # complex freqs_cis, (batch, seq, heads, dim)
        freqs = rotary(torch.zeros(1), ids)
        q, k = module.apply_rotary_emb(eye.transpose(1, 2), eye.transpose(1, 2), freqs)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        score = k[0, :, 0] @ q[0, 0, 1]
        hits = torch.nonzero(score.abs() > 1e-6).flatten().tolist()
        assert len(hits) == 2 and hits[0] == 0, hits
        return hits[1]
    cos, sin = rotary(torch.zeros(1), ids)
    if "mrope_section" in mrope and hasattr(module, "apply_multimodal_rotary_pos_emb"):
        # Qwen2-VL, Qwen2.5-VL; Qwen3-VL interleaves the axes inside its rotary
        # module and then applies plain rotate_half
        def apply(q, k, c, s):
            return module.apply_multimodal_rotary_pos_emb(
                q, k, c, s, mrope["mrope_section"])
    elif getattr(text, "rope_interleave", False):
        apply = module.apply_rotary_pos_emb_interleave
    else:
        apply = module.apply_rotary_pos_emb
    eye = torch.eye(d)[None, :, None, :].expand(1, d, 2, d)  # head j holds e_j
    q, k = apply(eye, eye, cos, sin)
    score = k[0, :, 0] @ q[0, 0, 1]
    hits = torch.nonzero(score.abs() > 1e-6).flatten().tolist()
    assert len(hits) == 2 and hits[0] == 0, hits
    return hits[1]
