"""What serving a rotary model needs, read from its ``config.json``.

Four answers the inspector (:mod:`posenc_lib.inspect`) reports:

- :func:`transformers_warnings`: the warnings transformers 4.57.6 logs when it
  loads the config (``rope_config_validation`` in ``modeling_rope_utils.py``),
  computed here without importing transformers;
- :func:`frequency_schedule`: whether the frequencies depend on the sequence
  length (so whether cached keys stay valid), and how many pairs a static
  method changes for short prompts too;
- :func:`angle_errors`: the error of cos and sin at the target length when the
  angles are computed in bfloat16, float16 or float32
  (:func:`posenc_lib.rope.cos_sin_error`);
- :func:`kv_cache_bytes`: the KV-cache size per token,
  ``2 x layers x num_key_value_heads x head_dim x bytes``, per layer type
  where a sliding window caps it.
"""

from __future__ import annotations

from typing import Mapping

import torch

from . import _config, _validate, rope

__all__ = ["transformers_warnings", "frequency_schedule", "angle_errors",
           "kv_cache_bytes", "ANGLE_DTYPES", "LENGTH_DEPENDENT"]

#: Rope types whose frequencies change with the current sequence length, with
#: the length at which they change (transformers 4.57's ``dynamic_rope_update``).
LENGTH_DEPENDENT = {
    "dynamic": "beyond max_position_embeddings, the base grows with the current "
               "length, so every pair but the first changes at every new length",
    "longrope": "at original_max_position_embeddings the short factors are "
                "swapped for the long ones, so every rescaled pair changes once",
}
#: The dtypes :func:`angle_errors` computes the angles in.
ANGLE_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16,
                "float32": torch.float32}
_FACTOR_KEYS = {"linear", "dynamic", "yarn", "llama3"}

#: The model types whose config class runs transformers 4.57.6's
#: ``rope_config_validation`` (in ``__init__``, or in a
#: ``_rope_scaling_validation`` it calls, as ``Olmo3Config``). Every other class
#: logs nothing about ``rope_scaling`` (``Llama4TextConfig``, ``Exaone4Config``,
#: ``MistralConfig``, ``Gemma2Config``, ``FalconConfig``, the Hunyuan classes,
#: ``Dots1Config``, ...; ``OlmoConfig``, ``Olmo2Config`` and ``Phi3Config`` run
#: checks of their own that raise). ``tests/test_transformers_warnings.py``
#: rebuilds the set from transformers' source and compares the logs of every
#: class in the table and the per-layer families.
VALIDATING_MODEL_TYPES = frozenset({
    "apertus", "arcee", "aria_text", "code_llama", "cohere", "cohere2", "csm",
    "deepseek_v2", "deepseek_v3", "diffllama", "doge", "efficientloftr", "ernie4_5",
    "ernie4_5_moe", "evolla", "flex_olmo", "gemma3_text", "gemma3n_text", "glm4_moe",
    "glm4v_moe_text", "glm4v_text", "gpt_neox", "gpt_neox_japanese", "gpt_oss",
    "granite", "granitemoe", "granitemoehybrid", "granitemoeshared", "llama",
    "longcat_flash", "moonshine", "nemotron", "olmo3", "olmoe", "persimmon", "phi",
    "phimoe", "qwen2", "qwen2_5_vl_text", "qwen2_moe", "qwen2_vl_text", "qwen3",
    "qwen3_moe", "qwen3_next", "qwen3_vl_moe_text", "qwen3_vl_text", "seed_oss",
    "smollm3", "stablelm", "starcoder2"})
#: Composite configs that, given the text fields at the top level (no
#: ``text_config``), pass them on to their text config class, which validates
#: them. ``Gemma3Config``, ``Qwen3VLConfig`` and ``AriaConfig`` build a default
#: text config instead and neither read nor validate a top-level ``rope_scaling``.
FLAT_TO_TEXT = frozenset({"glm4v", "glm4v_moe", "qwen2_vl", "qwen2_5_vl"})


def validates_rope(config: Mapping) -> bool:
    """Whether transformers 4.57.6 runs ``rope_config_validation`` on this
    config's rope block (see :data:`VALIDATING_MODEL_TYPES`; Granite 4.0's
    class runs it only with ``position_embedding_type`` ``"rope"``)."""
    text, model_type = _config._text_config(config)
    if model_type == "granitemoehybrid":
        return text.get("position_embedding_type") == "rope"
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        name = inner.get("model_type") or f"{config.get('model_type')}_text"
        return name in VALIDATING_MODEL_TYPES
    name = config.get("model_type")
    return name in VALIDATING_MODEL_TYPES or name in FLAT_TO_TEXT


def _float_or_missing(block: Mapping, key: str, what: str) -> list[str]:
    value = block.get(key)
    if value is None or not isinstance(value, float) or value < 1.0:
        return [f"`rope_scaling`'s {key} field must be {what}, got {value}"]
    return []


def transformers_warnings(config: Mapping) -> list[str]:
    """The warnings transformers 4.57.6 logs for the config's ``rope_scaling``.

    The same checks and the same text as ``rope_config_validation`` and its
    per-type validators in ``modeling_rope_utils.py``, after the preparation
    the config classes do (``type`` copied to ``rope_type``; DeepSeek-V3's
    class converts ``factor``, ``beta_fast`` and ``beta_slow`` to float first),
    and only where the config class runs that validation
    (:func:`validates_rope`; not Llama 4, EXAONE 4, Mistral, ...). Left out:
    unrecognized keys (the inspector lists them already). A
    ``max_position_embeddings`` the config omits is not guessed: the checks
    that need it are skipped.

    Returns:
        The messages in transformers' order; an empty list where it warns
        about nothing.
    """
    text, model_type = _config._text_config(config)
    block = text.get("rope_scaling")
    if not isinstance(block, Mapping) or not validates_rope(config):
        return []
    block = dict(block)
    if "type" in block:
        block["rope_type"] = block["type"]
    if model_type == "deepseek_v3":
        for key in ("beta_fast", "beta_slow", "factor"):
            if key in block:
                block[key] = float(block[key])
    rope_type = block.get("rope_type", "default")
    max_len = text.get("max_position_embeddings",  # Gemma 3's class fills it in
                       _config.MODEL_DEFAULTS.get(model_type, {})
                       .get("max_position_embeddings"))
    out: list[str] = []
    if rope_type not in ("default", "linear", "dynamic", "yarn", "llama3", "longrope"):
        return ["Missing validation function mapping in `ROPE_VALIDATION_FUNCTIONS` "
                f"for 'rope_type'='{rope_type}'"]
    if rope_type in _FACTOR_KEYS:
        out += _float_or_missing(block, "factor", "a float >= 1")
    if rope_type == "yarn":
        attention = block.get("attention_factor")
        if attention is not None and (not isinstance(attention, float) or attention < 0):
            out.append("`rope_scaling`'s attention_factor field must be a float greater "
                       f"than 0, got {attention}")
        fast, slow = block.get("beta_fast"), block.get("beta_slow")
        for key, value in (("beta_fast", fast), ("beta_slow", slow)):
            if value is not None and not isinstance(value, float):
                out.append(f"`rope_scaling`'s {key} field must be a float, got {value}")
        if (fast or 32) < (slow or 1):
            out.append(f"`rope_scaling`'s beta_fast field must be greater than beta_slow, "
                       f"got beta_fast={fast} (defaults to 32 if None) and "
                       f"beta_slow={slow} (defaults to 1 if None)")
        original, factor = block.get("original_max_position_embeddings"), block["factor"]
        if original is not None and max_len is not None:
            implicit = max_len / original
            if implicit != factor:
                out.append(
                    f"The explicitly set RoPE scaling factor (config.rope_scaling['factor'] "
                    f"= {factor}) does not match the ratio implicitly set by other "
                    "parameters (implicit factor = post-yarn context length / pre-yarn "
                    "context length = config.max_position_embeddings / "
                    "config.rope_scaling['original_max_position_embeddings'] = "
                    f"{implicit}). Using the explicit factor ({factor}) in YaRN. This may "
                    "cause unexpected behaviour in model usage, please correct the "
                    "'max_position_embeddings' fields in the model config.")
        elif original is None:
            out.append(
                "config.rope_scaling['original_max_position_embeddings'], the pre-yarn "
                "context length, is unset. We will **assume** "
                "config.max_position_embeddings holds the pre-yarn context length. Some "
                "use cases may expect config.max_position_embeddings to hold the "
                "post-yarn context length (pre-yarn context length * factor) -- we "
                "recommend updating both fields for optimal downstream model usage.")
    if rope_type == "llama3":
        low, high = block.get("low_freq_factor"), block.get("high_freq_factor")
        for key, value in (("low_freq_factor", low), ("high_freq_factor", high)):
            if value is None or not isinstance(value, float):
                out.append(f"`rope_scaling`'s {key} field must be a float, got {value}")
        if high is not None and low is not None and high <= low:
            out.append("`rope_scaling`'s high_freq_factor field must be greater than "
                       f"low_freq_factor, got high_freq_factor={high} and "
                       f"low_freq_factor={low}")
        original = block.get("original_max_position_embeddings")
        if original is None or not isinstance(original, int):
            out.append("`rope_scaling`'s original_max_position_embeddings field must be "
                       f"an integer, got {original}")
        if original is not None and max_len is not None and original >= max_len:
            out.append("`rope_scaling`'s original_max_position_embeddings field must be "
                       f"less than max_position_embeddings, got {original} and "
                       f"max_position_embeddings={max_len}")
    if rope_type == "longrope":
        dim = _config.parse_rope_config(config).dim
        for key in ("short_factor", "long_factor"):
            value = block.get(key)
            if isinstance(value, list) and len(value) != dim // 2:
                out.append(f"`rope_scaling`'s {key} field must have length {dim // 2}, "
                           f"got {len(value)}")
        if "original_max_position_embeddings" in text:
            out.append(
                "This model has set a `original_max_position_embeddings` field, to be used "
                "together with `max_position_embeddings` to determine a scaling factor. "
                "Please set the `factor` field of `rope_scaling`with this ratio instead -- "
                "we recommend the use of this field over `original_max_position_embeddings`"
                ", as it is compatible with most model architectures.")
        elif block.get("factor") is None:
            out.append("Missing required keys in `rope_scaling`: 'factor'")
        else:
            out += _float_or_missing(block, "factor", "a float >= 1")
    return out


def frequency_schedule(rope_type: str, trained: torch.Tensor,
                       extended: torch.Tensor) -> dict:
    """Whether the frequencies depend on the sequence length, and what that means.

    Args:
        rope_type: transformers' rope type.
        trained: ``(dim/2,)`` the pre-trained frequencies (plain RoPE).
        extended: ``(dim/2,)`` the frequencies a short prompt runs with: for a
            static method its only set; for ``"longrope"`` the short factors;
            for ``"dynamic"`` (plain up to ``L``) the trained ones.

    Returns:
        dict with ``length_dependent`` (bool), ``cache`` (what happens to
        cached keys, and what to do), and ``short_prompt_pairs_changed``: the
        pairs whose frequency at lengths up to ``L`` differs from ``trained``
        by more than one part in 10**6 (float64 inputs expected).
    """
    _validate.tensor("trained", trained, min_dim=1, floating=True)
    _validate.tensor("extended", extended, min_dim=1, floating=True)
    changed = int(((extended - trained).abs() > 1e-6 * trained.abs()).sum())
    if rope_type in LENGTH_DEPENDENT:
        cache = (f"frequencies depend on the sequence length: {LENGTH_DEPENDENT[rope_type]}."
                 " Keys cached before the change keep the old rotation; recompute them"
                 " (prefill again) or re-rotate them (rope.rerotate) when the length"
                 " crosses it, or fix one length for the whole generation")
    else:
        cache = "static: the frequencies never change, cached keys stay valid"
    return {"length_dependent": rope_type in LENGTH_DEPENDENT, "cache": cache,
            "short_prompt_pairs_changed": changed}


def angle_errors(dim: int, base: float, target_length: int, *,
                 window: int = 256) -> dict[str, float | None]:
    """Largest error of cos and sin over the last ``window`` positions before
    ``target_length``, with the angles in bfloat16, float16 and float32.

    Plain RoPE frequencies of ``dim`` and ``base``
    (:func:`~posenc_lib.rope.cos_sin_error`, cos and sin kept in the angle
    dtype). ``None`` where a position exceeds the dtype's largest finite value
    (float16 beyond 65,504).
    """
    target = _validate.positive_int("target_length", target_length)
    window = _validate.positive_int("window", window)
    positions = torch.arange(max(target - window, 0), target)
    out: dict[str, float | None] = {}
    for name, dtype in ANGLE_DTYPES.items():
        if target - 1 > torch.finfo(dtype).max:
            out[name] = None
            continue
        out[name] = float(rope.cos_sin_error(positions, dim, base,
                                             angle_dtype=dtype).max())
    return out


#: The sliding-window pattern a Gemma config class assumes when ``config.json``
#: names none (transformers 4.57: every ``pattern``-th layer is global).
_SLIDING_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6}


def _layer_types(text: Mapping, model_type, layers: int) -> tuple[list[str], str]:
    """Each layer's attention type, as transformers 4.57's config classes set it."""
    if isinstance(text.get("layer_types"), list):
        return list(text["layer_types"]), "layer_types"
    if text.get("sliding_window") is None:
        return ["full_attention"] * layers, "no sliding window"
    pattern = text.get("sliding_window_pattern") or _SLIDING_PATTERN.get(model_type)
    if pattern:  # the Gemma classes read no use_sliding_window
        return (["sliding_attention" if (i + 1) % pattern else "full_attention"
                 for i in range(layers)], f"sliding_window_pattern {pattern}")
    if text.get("use_sliding_window") is False:  # Qwen2's switch
        return ["full_attention"] * layers, "use_sliding_window false"
    if "max_window_layers" in text and "use_sliding_window" in text:  # Qwen2
        start = text["max_window_layers"]
        return (["sliding_attention" if i >= start else "full_attention"
                 for i in range(layers)], f"max_window_layers {start}")
    return ["sliding_attention"] * layers, "sliding_window on every layer"


def kv_cache_bytes(config: Mapping, *, bytes_per_value: int = 2,
                   length: int | None = None) -> dict | None:
    """KV-cache size: ``2 x layers x num_key_value_heads x head_dim x bytes`` per token.

    Keys and values per layer and token; DeepSeek's MLA caches per-head keys of
    ``qk_nope_head_dim + qk_rope_head_dim`` and values of ``v_head_dim`` in
    transformers 4.57, which the sum of the two sizes replaces ``2 x head_dim``
    by. A layer with a sliding window keeps at most ``sliding_window - 1``
    tokens between steps (transformers 4.57's ``DynamicSlidingWindowLayer``:
    the next query attends to those and to itself, ``sliding_window`` in all).

    Args:
        config: a parsed ``config.json``.
        bytes_per_value: 2 for bfloat16 or float16, 4 for float32, 1 for 8-bit.
        length: if given, the cache size in bytes at that many tokens.

    Returns:
        dict with ``bytes_per_token`` (every layer), ``by_layer_type`` (per
        type: layers, bytes per token, window, ``cap``: the tokens it keeps
        at most), ``layer_types_from`` and, with
        ``length``, ``bytes_at_length``; ``None`` when the config lacks
        ``num_hidden_layers``.
    """
    bytes_per_value = _validate.positive_int("bytes_per_value", bytes_per_value)
    text, model_type = _config._text_config(config)
    layers = text.get("num_hidden_layers")
    if layers is None:
        return None
    layers = _validate.positive_int("num_hidden_layers", layers)
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    if "qk_rope_head_dim" in text and "v_head_dim" in text:
        per_head = (text.get("qk_nope_head_dim", 0) + text["qk_rope_head_dim"]
                    + text["v_head_dim"])
    else:
        head_dim = text.get("head_dim") or text["hidden_size"] // heads
        per_head = 2 * head_dim
    per_layer = _validate.positive_int("num_key_value_heads", kv_heads) * per_head \
        * bytes_per_value
    types, source = _layer_types(text, model_type, layers)
    by_type: dict = {}
    for kind in dict.fromkeys(types):
        count = types.count(kind)
        window = text.get("sliding_window") if kind == "sliding_attention" else None
        by_type[kind] = {"layers": count, "bytes_per_token": count * per_layer,
                         "window": window, "cap": window - 1 if window else None}
    out = {"bytes_per_token": layers * per_layer, "bytes_per_value": bytes_per_value,
           "num_key_value_heads": int(kv_heads), "layers": layers,
           "by_layer_type": by_type, "layer_types_from": source}
    if length is not None:
        length = _validate.positive_int("length", length)
        out["length"] = length
        out["bytes_at_length"] = sum(
            info["bytes_per_token"] * (min(length, info["cap"]) if info["cap"]
                                       else length)
            for info in by_type.values())
    return out
