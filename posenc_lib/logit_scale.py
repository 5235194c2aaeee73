"""The factors a config puts on the attention logits ``q·k`` before the
softmax: the softmax scale (the ``scaling`` an attention module is called
with), the rotary module's ``attention_factor``, DeepSeek's ``mscale²`` and
the position-dependent query temperatures.

The inspector's report lists them (:func:`posenc_lib.tools.inspector.inspect_config`,
which exports both functions under its own name); the cross-check and the
conformance sweep compare :func:`softmax_scale` with the scale that
transformers' attention receives. It sits below all three, so that their
imports run one way.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

from . import config_reader, per_layer, serving

__all__ = ["logit_factors", "softmax_scale", "layer_softmax_scales"]


def _mscale(scale: float, weight: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0


def logit_factors(config: Mapping, rope, attention_factor: float,
                  layers: list | None = None) -> list[dict]:
    """Every factor the config puts on the attention logits ``q·k``, in order:
    the softmax scale (``1/√d_head``, Gemma's ``query_pre_attn_scalar``,
    DeepSeek's ``1/√(qk_nope_head_dim + qk_rope_head_dim)``, Granite's
    ``attention_multiplier``), the cos/sin ``attention_factor`` (squared: it
    scales both q and k), DeepSeek's softmax ``mscale²``
    (``DeepseekV3Attention``), and the position-dependent query temperatures
    (Llama 4's NoPE layers; Mistral's ``llama_4_scaling_beta``, a 5.x key).

    Each entry: ``name``, ``value`` (a number, or ``None`` for a factor that
    depends on the position), ``formula`` and ``source``.
    """
    text, model_type = config_reader._text_config(config)
    model_type = (model_type or "").removesuffix("_text")
    one = _global_config(config)
    block = {} if one is None else config_reader._rope_block(
        config_reader._text_config(one)[0])[0]
    out = []
    head_dim = rope.head_dim if rope is not None else \
        serving.cache_head(config)["key_dim"]
    if model_type in ("gemma3n", "gemma4", "gemma4_unified"):
        out.append({"name": "softmax scale", "value": 1.0,
                    "formula": "1 (q and k are RMS-normalised)",
                    "source": "Gemma3nTextAttention and Gemma4TextAttention call "
                              "attention with scaling=1.0"})
    elif text.get("query_pre_attn_scalar") is not None or model_type in ("gemma2",
                                                                         "gemma3"):
        scalar = text.get("query_pre_attn_scalar") or 256  # the classes' default
        out.append({"name": "softmax scale", "value": scalar ** -0.5,
                    "formula": f"query_pre_attn_scalar^-1/2 = {scalar}^-1/2",
                    "source": "Gemma2Attention / Gemma3Attention"})
    elif (model_type in ("deepseek_v3", "deepseek_v2")
          or text.get("kv_lora_rank") is not None) and \
            text.get("qk_nope_head_dim") is not None:
        # MLA: the query/key head is the unrotated part and the rotated one
        # (a model without RoPE: the rotated part's size, which it leaves unrotated)
        # (Dots 3 Note: its rope.head_dim is head_dim, not the rotated part)
        qk = text["qk_nope_head_dim"] + (
            head_dim if rope is not None and model_type != "dots3_note" else
            text.get("qk_rope_head_dim", 64))
        out.append({"name": "softmax scale", "value": qk ** -0.5,
                    "formula": f"(qk_nope_head_dim + qk_rope_head_dim)^-1/2 = {qk}^-1/2",
                    "source": "DeepseekV3Attention.scaling" if model_type in (
                        "deepseek_v3", "deepseek_v2") else
                    "the MLA attention's scaling (qk_head_dim^-1/2)"})
    elif text.get("attention_multiplier") is not None:
        out.append({"name": "softmax scale", "value": float(text["attention_multiplier"]),
                    "formula": "attention_multiplier", "source": "GraniteAttention"})
    elif model_type in per_layer.INKLING:
        # InklingAttention: 1/head_dim (q and k are RMS-normalised per head);
        # Inkling2's attentions: head_dim^-1/2 (q and k L2-clipped); the sliding
        # layers with swa_head_dim (layer_softmax_scales)
        v1 = model_type == "inkling"
        out.append({"name": "softmax scale", "value": head_dim ** (-1.0 if v1 else -0.5),
                    "formula": (f"1/head_dim = 1/{head_dim}" if v1 else
                                f"head_dim^-1/2 = {head_dim}^-1/2")
                    + " on hybrid layers (swa_head_dim on hybrid_sliding ones)",
                    "source": "InklingAttention.scaling" if v1 else
                    "Inkling2SlidingAttention / Inkling2FullAttention .scaling"})
        floor = text.get("log_scaling_n_floor", None if v1 else "class default")
        if floor is not None:
            out.append({"name": "query temperature, hybrid layers", "value": None,
                        "formula": "1 + log_scaling_alpha·ln(max((p + 1)/"
                                   "log_scaling_n_floor, 1))",
                        "source": "InklingAttention (log_scaling_n_floor)" if v1
                        else "Inkling2LogScale (log_scaling_n_floor)"})
    elif model_type in ("zamba", "zamba2"):  # half its (doubled) head
        # ZambaAttention.scaling, Zamba2Attention.scaling: (attention_head_dim / 2)^-1/2,
        # the attention's head whether or not Zamba2 rotates it (use_mem_rope)
        head_dim = serving.cache_head(config)["key_dim"]
        out.append({"name": "softmax scale", "value": (head_dim / 2) ** -0.5,
                    "formula": f"(attention_head_dim / 2)^-1/2 = {head_dim / 2:g}^-1/2",
                    "source": "ZambaAttention.scaling" if model_type == "zamba"
                    else "Zamba2Attention.scaling"})
    else:
        out.append({"name": "softmax scale", "value": head_dim ** -0.5,
                    "formula": f"head_dim^-1/2 = {head_dim}^-1/2",
                    "source": "every other attention module"})
    out.append({"name": "cos/sin attention factor, squared",
                "value": attention_factor ** 2,
                "formula": f"{attention_factor:.6g}^2 (it scales q and k)",
                "source": "the rotary module's attention_scaling"})
    if rope is None:
        return out
    if model_type in ("deepseek_v3", "deepseek_v2") and block.get("mscale_all_dim") \
            and rope.factor:
        m = _mscale(rope.factor, block["mscale_all_dim"])
        out.append({"name": "softmax mscale, squared", "value": m * m,
                    "formula": f"(0.1·{block['mscale_all_dim']:g}·ln {rope.factor:g} "
                               f"+ 1)^2", "source": "DeepseekV3Attention.scaling"})
    temps = [e["temperature"] for e in layers or [] if e.get("temperature")]
    if temps:
        t = temps[0]
        out.append({"name": f"query temperature, {len(temps)} NoPE layers",
                    "value": None,
                    "formula": t.get("formula") or (
                        f"1 + {t['attn_scale']:g}·ln(1 + ⌊(p + 1)/"
                        f"{t['floor_scale']:g}⌋)"),
                    "source": t.get("source")
                    or "Llama4TextAttention (attn_temperature_tuning)"})
    if block.get("llama_4_scaling_beta") is not None:
        beta = block["llama_4_scaling_beta"]
        length = block.get("original_max_position_embeddings")
        out.append({"name": "query temperature, every layer", "value": None,
                    "formula": f"1 + {beta:g}·ln(1 + ⌊p/{length}⌋)",
                    "source": "llama_4_scaling_beta (transformers 5.x; 4.57.6 does "
                              "not read it)"})
    return out


def layer_softmax_scales(config: Mapping) -> dict[int, float] | None:
    """``{layer: scale}`` for a model whose softmax scale differs between its
    layers (Inkling's: each layer type has its own head size; Dots 3 Note's
    sliding layers: their own MLA sizes), else ``None``
    (one scale, :func:`softmax_scale`)."""
    text, model_type = config_reader._text_config(config)
    model_type = (model_type or "").removesuffix("_text")
    if model_type == "dots3_note":  # Dots3NoteTextAttention: (qk_nope + qk_rope)^-1/2
        overrides = config_reader.layer_overrides(text, model_type)
        out = {}
        for x in per_layer.layer_layout(config):
            fields = {**text, **overrides.get(x.index, {})}
            out[x.index] = (fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]) ** -0.5
        return out
    if model_type not in per_layer.INKLING:
        return None
    power = -1.0 if model_type == "inkling" else -0.5
    full = serving.cache_head(config)["key_dim"] ** power
    sliding = serving._inkling_sliding_head(text, model_type)["key_dim"] ** power
    return {x.index: sliding if x.attention == "hybrid_sliding" else full
            for x in per_layer.layer_layout(config)}


def _global_config(config: Mapping) -> Mapping | None:
    """``config``, or for a 5.x ``rope_parameters`` with one block per layer
    type and none (or ``None``) for ``full_attention`` (Beam, ZAYA) the first
    rotating layer's config (:func:`posenc_lib.per_layer.layer_config`), whose
    block holds the factors; ``None`` when no layer rotates."""
    text, _ = config_reader._raw_text_config(config)
    nested = text.get("rope_parameters")
    if not config_reader.is_per_layer_type(nested) or \
            isinstance(nested.get("full_attention"), Mapping):
        return config
    for layer in per_layer.layer_layout(config):
        if layer.rope is not None:
            return per_layer.layer_config(config, layer.index)
    return None


def softmax_scale(config: Mapping) -> float | None:
    """The constant factor the attention applies to ``q·k`` before the
    softmax (the ``scaling`` it is called with): the softmax scale and
    DeepSeek's ``mscale²`` of :func:`logit_factors`; the cos/sin attention
    factor is not in it (the rotated q and k carry it). Works for a model
    without RoPE too (the head size from :func:`posenc_lib.serving.cache_head`).
    """
    rope = None
    _, model_type = config_reader._text_config(config)
    if model_type in config_reader.ATTENTION_FREE:
        return None  # no attention, no softmax
    if config_reader.positional_scheme(config) == "rotary":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one = _global_config(config)
            rope = None if one is None else config_reader.parse_rope_config(one)
    factors = logit_factors(config, rope, 1.0)
    return math.prod(f["value"] for f in factors if f["value"] is not None
                     and not f["name"].startswith("cos/sin"))
