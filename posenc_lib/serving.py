"""What serving a rotary model needs, read from its ``config.json``.

Four answers the inspector (:mod:`posenc_lib.tools.inspector`) reports:

- :func:`transformers_warnings`: the warnings the installed transformers logs
  when it loads the config (4.57.6's ``rope_config_validation`` or 5.24.0's
  ``RotaryEmbeddingConfigMixin.validate_rope``, in ``modeling_rope_utils.py``),
  computed here without importing transformers;
- :func:`frequency_schedule`: whether the frequencies depend on the sequence
  length (so whether cached keys stay valid), and how many pairs a static
  method changes for short prompts too;
- :func:`angle_errors`: the error of cos and sin at the target length when the
  angles are computed in bfloat16, float16 or float32
  (:func:`posenc_lib.rope.cos_sin_error`);
- :func:`kv_cache_bytes`: the KV-cache size of one sequence, layer by layer
  from :func:`posenc_lib.per_layer.layer_layout` (full, sliding, chunked,
  MLA; linear-attention, convolution and Mamba layers hold a fixed state
  instead, :func:`fixed_state_bytes`), for transformers 4.57.6 or vLLM
  0.33.0 (its layers and windows as its own model classes build them,
  compared with a run of them on every causal-LM architecture it serves:
  ``results/vllm-layers.json``; its block arithmetic transcribed).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Mapping

import torch

from . import config_reader, _validate, _validate_config, per_layer, rope
from ._versions import MIMICKED_VERSIONS, mimicked_transformers_version

__all__ = ["transformers_warnings", "mimicked_transformers_version",
           "MIMICKED_VERSIONS", "KEEPS_TYPE_KEY", "validates_rope", "VALIDATING_MODEL_TYPES",
           "FLAT_TO_TEXT", "frequency_schedule", "angle_errors",
           "kv_cache_bytes", "cache_head", "fixed_state_bytes", "ANGLE_DTYPES",
           "LENGTH_DEPENDENT", "ENGINES", "NO_KV", "LAYER_TYPED", "HYBRID_CACHES",
           "MLA_DEFAULTS", "STATE_DEFAULTS", "VLLM_BLOCK_SIZE", "VLLM_SOURCE"]

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
    text, model_type = config_reader._text_config(config)
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


def _major(version: str | None) -> int:
    """4 or 5: the transformers major version whose caches to model
    (``version``, default the installed one; see
    :func:`mimicked_transformers_version`, whose errors it raises)."""
    return int(mimicked_transformers_version(version).split(".")[0])


#: transformers 4.57.6 classes that validate but do not copy a legacy ``type``
#: key to ``rope_type``: a block that names its method in ``type`` only makes
#: ``rope_config_validation`` raise ``KeyError`` (``rope_type`` missing).
#: ``tests/test_transformers_warnings.py`` rebuilds the set from 4.57.6.
KEEPS_TYPE_KEY = frozenset({
    "cohere", "cohere2", "gemma3_text", "gemma3n_text", "granite", "granitemoe",
    "granitemoehybrid", "granitemoeshared", "moonshine", "olmo3", "qwen3_next", "qwen3_vl_moe_text",
    "qwen3_vl_text"})


def _rotary_dim(text: Mapping, model_type) -> int:
    """``int(head_dim * partial_rotary_factor)``, the rotated features, with
    the class defaults for fields the config omits (GPT-NeoX's ``rotary_pct``)."""
    fields = {**config_reader.MODEL_DEFAULTS.get(model_type, {}), **text}
    partial = fields.get("partial_rotary_factor", fields.get("rotary_pct", 1.0))
    return int(config_reader._head_dim(fields) * partial)


def _missing_keys(rope_type: str, block: Mapping, required: set[str],
                  field: str) -> list[str]:
    """transformers' ``KeyError`` for required keys the block lacks, as the
    one line ``"KeyError: ..."`` (the config does not load)."""
    missing = required - set(block)
    if not missing:
        return []
    listed = "{" + ", ".join(repr(k) for k in sorted(missing)) + "}"
    return [f"KeyError: Missing required keys in `{field}` for "
            f"'rope_type'='{rope_type}': {listed}"]


#: Config classes that read a RoPE block of type ``mrope`` as ``default``
#: before validating it (transformers 4.57.6: ``Qwen2VLConfig`` and
#: ``Qwen2_5_VLConfig`` and their text configs, when the block has ``type``;
#: 5.24.0: the same classes, from ``rope_type`` or ``type``).
_MROPE_AS_DEFAULT = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen2_vl_text",
                               "qwen2_5_vl_text"})


def transformers_warnings(config: Mapping, version: str | None = None) -> list[str]:
    """The warnings transformers logs for the config's RoPE block.

    Reproduces transformers 4.57.6 or 5.24.0, whichever
    :func:`mimicked_transformers_version` names for ``version`` (default:
    the installed transformers). ``tests/test_transformers_warnings.py``
    compares both with what each release really logs, on a generated
    population of configs.

    - **4.57.6**: ``rope_config_validation`` and its per-type validators in
      ``modeling_rope_utils.py``, after the preparation the config classes do
      (``type`` copied to ``rope_type``; DeepSeek-V3's class converts
      ``factor``, ``beta_fast`` and ``beta_slow`` to float first), and only
      where the config class runs that validation (:func:`validates_rope`;
      not Llama 4, EXAONE 4, Mistral, ...).
    - **5.24.0**: ``RotaryEmbeddingConfigMixin.standardize_rope_params`` and
      ``validate_rope``, which every config class runs; ``rope_scaling`` or
      ``rope_parameters``. Where the block leaves out
      ``original_max_position_embeddings``, 5.x fills it with
      ``max_position_embeddings``, so YaRN's "does not match the ratio"
      warning is skipped (it warns only when the implicit factor is neither
      ``factor`` nor 1), and ints pass where 4.57.6 asks for floats.

    Left out: unrecognized keys (the inspector lists them already). Where
    transformers refuses the config (a required key missing), the last line
    is its ``KeyError``. A ``max_position_embeddings`` the config omits is
    not guessed (its class default where the table has one): the checks
    that need it are skipped. Messages transformers logs with
    ``warning_once`` appear for every config, as if each were loaded first.

    Returns:
        The messages in transformers' order; an empty list where it warns
        about nothing.
    """
    if mimicked_transformers_version(version).startswith("5."):
        return _transformers_5_warnings(config)
    return _transformers_4_warnings(config)


def _transformers_5_warnings(config: Mapping) -> list[str]:
    """transformers 5.24.0's RoPE messages (see :func:`transformers_warnings`)."""
    text, model_type = config_reader._raw_text_config(config)
    if config.get("model_type") == "kimi_k2":
        return []  # no class in transformers 5.24 (it has DeepSeek-V3.2's); remote code
    block = text.get("rope_scaling") or text.get("rope_parameters")
    if not isinstance(block, Mapping) or not block:
        return []
    max_len = text.get("max_position_embeddings",
                       config_reader.MODEL_DEFAULTS.get(model_type, {})
                       .get("max_position_embeddings"))
    labels = text.get("layer_types") or ()
    nested = [key for key in block if key in labels]
    entries = [block[key] for key in nested] if nested else [block]
    if model_type == "olmo3" and text.get("rope_scaling"):
        # Olmo3Config.convert_rope_params_to_dict updates its full-attention
        # entry {"rope_type": "default"} with the legacy block, so a block that
        # names its method in ``type`` only runs (and is checked) as default
        entries = [{"rope_type": "default", **block}]
    out: list[str] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        entry = dict(entry)
        if model_type in _MROPE_AS_DEFAULT and \
                entry.get("rope_type", entry.get("type")) == "mrope":
            entry["rope_type"] = "default"  # Qwen2VLConfig / Qwen2_5_VLConfig (5.24.0)
        for message in _validate_5(entry, text, model_type, max_len, config):
            if message not in out or not message.startswith(_WARN_ONCE_5):
                out.append(message)
            if message.startswith("KeyError"):
                return out
    return out


_WARN_ONCE_5 = ("The explicitly set RoPE scaling factor", "This model config has set")


def _validate_5(entry: dict, text: Mapping, model_type, max_len, config) -> list[str]:
    entry.setdefault("rope_type", entry.get("type", "default"))
    rope_type = entry["rope_type"]
    if rope_type in ("llama3", "yarn", "longrope"):
        if model_type in ("phi3", "phimoe") and "original_max_position_embeddings" in text:
            entry["original_max_position_embeddings"] = \
                text["original_max_position_embeddings"]
        else:
            entry.setdefault("original_max_position_embeddings", max_len)
    field = "rope_parameters"
    required = {"rope_type", "factor"}
    if rope_type in ("default", "axial", "proportional"):
        required = {"rope_type"} | ({"rope_theta"} if rope_type == "proportional" else set())
        entry.setdefault("rope_theta", text.get("rope_theta", 10_000.0))
        return _missing_keys(rope_type, entry, required, field)
    if rope_type not in ("linear", "dynamic", "yarn", "llama3", "longrope"):
        return ["Missing validation function in 'RotaryEmbeddingConfigMixin' for "
                f"'rope_type'='{rope_type}'"]
    if rope_type == "yarn":
        required = {"rope_type", "factor", "original_max_position_embeddings"}
    if rope_type == "longrope":
        required = {"rope_type", "short_factor", "long_factor",
                    "original_max_position_embeddings"}
    if rope_type == "llama3":
        entry.setdefault("rope_theta", text.get("rope_theta", 10_000.0))
        required = {"rope_type", "factor", "original_max_position_embeddings",
                    "low_freq_factor", "high_freq_factor", "rope_theta"}
    missing = _missing_keys(rope_type, entry, required, field)
    if missing:
        return missing
    number = (float, int)
    out: list[str] = []
    factor = entry.get("factor")

    def factor_check() -> None:
        if factor is None or not isinstance(factor, number) or factor < 1.0:
            out.append(f"`{field}`'s factor field must be a float or int >= 1, got {factor}")

    if rope_type in ("linear", "dynamic", "yarn", "llama3"):
        factor_check()
    if rope_type == "yarn":
        attention = entry.get("attention_factor")
        if attention is not None and (not isinstance(attention, float) or attention < 0):
            out.append(f"`{field}`'s attention_factor field must be a float greater "
                       f"than 0, got {attention}")
        fast, slow = entry.get("beta_fast"), entry.get("beta_slow")
        for key, value in (("beta_fast", fast), ("beta_slow", slow)):
            if value is not None and not isinstance(value, number):
                out.append(f"`{field}`'s {key} field must be a float or int, got {value}")
        if (fast or 32) < (slow or 1):
            out.append(f"`{field}`'s beta_fast field must be greater than beta_slow, "
                       f"got beta_fast={fast} (defaults to 32 if None) and "
                       f"beta_slow={slow} (defaults to 1 if None)")
        implicit = max_len / entry["original_max_position_embeddings"]
        if implicit != factor and implicit != 1:
            out.append(
                f"The explicitly set RoPE scaling factor (config.rope_parameters['factor'] "
                f"= {factor}) does not match the ratio implicitly set by other parameters "
                "(implicit factor = post-yarn context length / pre-yarn context length = "
                "config.max_position_embeddings / "
                "config.rope_parameters['original_max_position_embeddings'] = "
                f"{implicit}). Using the explicit factor ({factor}) in YaRN. This may "
                "cause unexpected behaviour in model usage, please correct the "
                "'original_max_position_embeddings' fields in the model config.")
    if rope_type == "longrope":
        dim = _rotary_dim(text, model_type)
        for key in ("short_factor", "long_factor"):
            value = entry[key]
            if not (isinstance(value, list) and all(isinstance(x, number) for x in value)):
                out.append(f"`{field}`'s {key} field must be a list of numbers, got {value}")
            if len(value) != dim // 2:
                out.append(f"`{field}`'s {key} field must have length {dim // 2}, "
                           f"got {len(value)}")
        original = entry["original_max_position_embeddings"]
        if factor is None and original is not None:
            out.append(
                "This model config has set a `rope_parameters['original_max_position_"
                "embeddings']` field, to be used together with `max_position_embeddings` "
                "to determine a scaling factor. Please set the `factor` field of "
                "`rope_parameters`with this ratio instead -- we recommend the use of "
                "this field over `original_max_position_embeddings`, as it is compatible "
                "with most model architectures.")
        elif factor is None:
            out.append("Missing required keys in `rope_parameters`: 'factor'")
        elif not isinstance(factor, number) or factor < 1.0:
            factor_check()
        attention = entry.get("attention_factor")
        if attention is not None and (not isinstance(attention, number) or attention < 0):
            out.append(f"`{field}`'s attention_factor field must be a float or int "
                       f"greater than 0, got {attention}")
    if rope_type == "llama3":
        low, high = entry["low_freq_factor"], entry["high_freq_factor"]
        if low is None or not isinstance(low, number):
            out.append(f"`{field}`'s low_freq_factor field must be a float, or int got {low}")
        if high is None or not isinstance(high, number):
            out.append(f"`{field}`'s high_freq_factor field must be a float or int, "
                       f"got {high}")
        if high <= low:
            out.append(f"`{field}`'s high_freq_factor field must be greater than "
                       f"low_freq_factor, got high_freq_factor={high} and "
                       f"low_freq_factor={low}")
        original = entry["original_max_position_embeddings"]
        if original is None or not isinstance(original, int):
            out.append(f"`{field}`'s original_max_position_embeddings field must be an "
                       f"integer, got {original}")
        if original >= max_len:
            out.append(f"`{field}`'s original_max_position_embeddings field must be "
                       f"less than max_position_embeddings, got {original} and "
                       f"max_position_embeddings={max_len}")
    return out


def _transformers_4_warnings(config: Mapping) -> list[str]:
    """transformers 4.57.6's RoPE messages (see :func:`transformers_warnings`)."""
    text, model_type = config_reader._text_config(config)
    block = text.get("rope_scaling")
    if not isinstance(block, Mapping) or not validates_rope(config):
        return []
    block = dict(block)
    if model_type in _MROPE_AS_DEFAULT and block.get("type") == "mrope":
        block["type"] = "default"  # Qwen2VLConfig / Qwen2_5_VLConfig (4.57.6) do this
    if "type" in block and not ({model_type, f"{model_type}_text"} & KEEPS_TYPE_KEY):
        block["rope_type"] = block["type"]
    if model_type == "deepseek_v3":
        for key in ("beta_fast", "beta_slow", "factor"):
            if key in block:
                block[key] = float(block[key])
    rope_type = block.get("rope_type", block.get("type", "default"))
    max_len = text.get("max_position_embeddings",  # Gemma 3's class fills it in
                       config_reader.MODEL_DEFAULTS.get(model_type, {})
                       .get("max_position_embeddings"))
    out: list[str] = []
    if rope_type not in ("default", "linear", "dynamic", "yarn", "llama3", "longrope"):
        return ["Missing validation function mapping in `ROPE_VALIDATION_FUNCTIONS` "
                f"for 'rope_type'='{rope_type}'"]
    required = {"default": set(), "longrope": {"short_factor", "long_factor"},
                "llama3": {"factor", "original_max_position_embeddings",
                           "low_freq_factor", "high_freq_factor"}}
    missing = _missing_keys(rope_type, block,
                            {"rope_type"} | required.get(rope_type, {"factor"}),
                            "rope_scaling")
    if missing:
        return missing
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
        dim = _rotary_dim(text, model_type)
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
    if extended.shape != trained.shape:
        raise ValueError(f"extended has shape {tuple(extended.shape)}, trained "
                         f"{tuple(trained.shape)}: give one frequency per pair in both")
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
                 window: int = 256,
                 frequencies: torch.Tensor | None = None) -> dict[str, float | None]:
    """Largest error of cos and sin over the last ``window`` positions before
    ``target_length``, with the angles in bfloat16, float16 and float32.

    The frequencies are ``frequencies`` when given (``(dim/2,)``, float64: the
    configured method's, e.g. YaRN's at the target length), else plain RoPE's
    of ``dim`` and ``base``; they are rounded to the angle dtype once, the
    positions converted to it, the angles and cos and sin computed in it, as
    :func:`~posenc_lib.rope.cos_sin_error` does, against float64. ``None``
    where a position exceeds the dtype's largest finite value (float16 beyond
    65,504).
    """
    target = _validate.length("target_length", target_length)
    window = _validate.positive_int("window", window)
    positions = torch.arange(max(target - window, 0), target)
    if frequencies is not None:
        _validate.tensor("frequencies", frequencies, min_dim=1, floating=True)
        if frequencies.shape != (dim // 2,):
            raise ValueError(f"frequencies must have shape ({dim // 2},) for dim={dim}, "
                             f"got {tuple(frequencies.shape)}")
        reference = rope.rope_angles(positions.double(), frequencies.double())
    out: dict[str, float | None] = {}
    for name, dtype in ANGLE_DTYPES.items():
        if target - 1 > torch.finfo(dtype).max:
            out[name] = None
            continue
        if frequencies is None:
            out[name] = float(rope.cos_sin_error(positions, dim, base,
                                                 angle_dtype=dtype).max())
            continue
        angles = rope.rope_angles(positions, frequencies.double().to(dtype))
        out[name] = max(float((fn(angles).double() - fn(reference)).abs().max())
                        for fn in (torch.cos, torch.sin))
    return out


#: The engines :func:`kv_cache_bytes` knows.
ENGINES = ("transformers", "vllm")
#: Layer types that hold no keys and values, and the state they keep instead.
NO_KV = {"linear_attention": "gated DeltaNet state (conv + recurrent)",
         "conv": "short-convolution state", "mamba": "Mamba state (conv + SSM)",
         "recurrent": "recurrent state (RWKV, xLSTM)",
         "mlp": "no attention: an MLP block (Nemotron-H)",
         "moe": "no attention: a mixture-of-experts block (Nemotron-H)",
         "shared_kv": "no cache of its own: it reads an earlier layer's keys and "
                      "values (Gemma 3n's num_kv_shared_layers)",
         "cross_attention": "the keys and values of the image's states, a size per "
                            "image, not per token (Mllama's cross-attention layers; "
                            "not sized)"}
#: Config classes of transformers 4.57.6 that carry ``layer_types``: a
#: ``DynamicCache`` reads its layer types from them. On any other class it makes
#: every layer a sliding one when the config has a ``sliding_window`` (or an
#: ``attention_chunk_size``), else every layer full (``DynamicCache.__init__`` in
#: ``cache_utils.py``). ``tests/test_kv_cache.py`` checks the list.
LAYER_TYPED = frozenset({
    "cohere2", "dots1", "exaone4", "gemma2", "gemma3", "gemma3n", "gpt_oss", "lfm2",
    "llama4", "minimax", "ministral", "olmo3", "qwen2", "qwen2_5_vl", "qwen2_vl",
    "qwen3", "qwen3_next", "smollm3", "vaultgemma"})
#: Config classes only transformers 5.x has whose ``layer_types`` the library
#: expands (``per_layer._PATTERNS``): their class always defines layer types,
#: so 5.x's ``DynamicCache(config)`` follows them, not the "every layer
#: slides" rule of a class without them (``tests/test_layer_patterns.py``
#: compares with the caches 5.24.0 builds, ``results/layer-patterns-5.json``).
LAYER_TYPED_5 = frozenset({
    "afmoe", "axk2", "bailing_hybrid", "beam", "cohere2_moe", "cwm", "exaone_moe",
    "flint", "gemma4", "gemma4_unified", "glm_moe_dsa", "granite_swa",
    "granitemoe_swa", "hy_v4", "kolibri1", "lara_mini", "lfm3", "mimo_v2_flash",
    "olmo_hybrid", "qwen3_5", "qwen3_5_moe", "zaya"})
#: Models that return the legacy cache, a (keys, values) tuple per layer that
#: grows with every token whatever ``sliding_window`` says (transformers 4.57.6
#: ``models/deprecated/open_llama/modeling_open_llama.py`` line 299).
TUPLE_CACHE = frozenset({"open-llama"})
#: Models whose own cache class follows their layer types (transformers 4.57.6).
HYBRID_CACHES = {"lfm2": "Lfm2HybridConvCache", "qwen3_next": "Qwen3NextDynamicCache",
                 "minimax": "MiniMaxCache",
                 "granitemoehybrid": "HybridMambaAttentionDynamicCache",
                 # every Falcon-H1 layer runs attention and Mamba side by side;
                 # its keys never slide, whatever sliding_window says (4.57.6;
                 # 5.24.0's DynamicCache: LinearAttentionAndFullAttentionLayer)
                 "falcon_h1": "FalconHybridMambaAttentionDynamicCache"}
#: ``DeepseekV3Config``'s defaults for the MLA sizes (transformers 4.57.6).
MLA_DEFAULTS = {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "v_head_dim": 128}
#: The sparse-attention (DSA) models whose transformers 5.x cache keeps, beside
#: each indexed layer's keys and values, the indexer's keys: one
#: ``index_head_dim`` vector per token (``DynamicIndexedLayer.update_indexer``,
#: ``cache_utils.py`` of 5.24.0); their classes' default ``index_head_dim``.
#: DeepSeek-V3.2 is read as DeepSeek-V3 (``config_reader.MODEL_TYPE_ALIASES``)
#: for its positions, but its 5.x class makes every layer an indexed one.
INDEXER_DEFAULTS = {"deepseek_v32": 128, "glm_moe_dsa": 128, "axk2": 128,
                    "hy_v4": 128, "qwen4_exp": None, "dots3_note": 128}
#: Indexers whose keys are float32 whatever the model's dtype: Dots 3 Note's
#: indexed layers get cos and sin computed from ``inputs_embeds.float()``, and
#: its indexer concatenates the float32 rotated part with the rest of the key
#: before caching it (5.24.0 ``models/dots3_note/modeling_dots3_note.py``,
#: ``Dots3NoteTextModel.forward`` and ``Dots3NoteTextIndexer.forward``;
#: measured in bfloat16 by ``scripts/generated_caches.py``).
INDEXER_FLOAT32 = frozenset({"dots3_note"})
#: Indexers whose width has another name: Qwen4-Exp's ``indexer_head_dim``
#: (its one key head, ``indexer_kv_heads`` must be 1), without a class default
#: (``Qwen4ExpTextConfig`` does not build without it where a layer is indexed;
#: 5.24.0 ``models/qwen4_exp/configuration_qwen4_exp.py``, its cache
#: ``DynamicIndexedLayer.update_indexer``).
INDEXER_FIELD = {"qwen4_exp": "indexer_head_dim"}
#: ``MiMoV2FlashConfig``'s default ``v_head_dim`` (5.24.0): its values are
#: narrower than its keys (``head_dim`` 192) without MLA.
V_HEAD_DIM_DEFAULTS = {"mimo_v2_flash": 128}
#: Layer types whose attention keeps a multiple of ``num_key_value_heads``:
#: MiMoV2FlashAttention gives its sliding layers twice as many (5.24.0,
#: ``models/mimo_v2_flash/modeling_mimo_v2_flash.py`` line 341).
KV_HEADS_MULTIPLE = {"mimo_v2_flash": {"sliding_attention": 2}}
#: Models whose linear-attention layers are Qwen3-Next's gated DeltaNet: a
#: convolution state in the model's dtype and a recurrent state that
#: transformers' torch implementation keeps in float32 (seen in bfloat16 runs
#: of 5.24.0's tiny models of each).
GATED_DELTANET = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "olmo_hybrid", "lara_mini",
                  "qwen4_exp")
#: The models whose vLLM state :func:`fixed_state_bytes` transcribes; for the
#: others it returns ``None`` under ``engine="vllm"`` (not sized).
VLLM_STATE_TYPES = ("lfm2", "qwen3_next", "granitemoehybrid")
#: Qwen3-Next's gated-DeltaNet sizes, the defaults of Qwen3.5's classes too.
_QWEN3_NEXT_STATE = {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                     "linear_value_head_dim": 128, "linear_num_key_heads": 16,
                     "linear_num_value_heads": 32}
#: Class defaults of the sizes of the fixed (length-independent) state.
STATE_DEFAULTS = {
    "lfm2": {"conv_L_cache": 3},
    "qwen3_next": _QWEN3_NEXT_STATE,
    "minimax": {},
    "zaya": {"cca_time0": 2, "cca_time1": 2},  # ZayaConfig (5.24.0)
    "cpmant": {"prompt_length": 32},  # CpmAntConfig
    "lfm3": {"conv_L_cache": 7},  # Lfm3Config (5.24.0)
    "lfm2_moe": {"conv_L_cache": 3},  # Lfm2MoeConfig (5.24.0)
    # 5.24.0's gated-DeltaNet hybrids, Qwen3-Next's state (their classes'
    # defaults, results/class-defaults-5.json)
    "qwen3_5": _QWEN3_NEXT_STATE, "qwen3_5_moe": _QWEN3_NEXT_STATE,
    # Qwen4ExpTextConfig: Qwen3-Next's sizes, and the short convolution of its
    # per-layer embeddings (PLE) on the layers ple_layer_ids names
    "qwen4_exp": {**_QWEN3_NEXT_STATE, "hc_count": 4, "ple_conv_kernel_size": 4,
                  "ngram_size": 3},
    "olmo_hybrid": {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 96,
                    "linear_value_head_dim": 192, "linear_num_key_heads": 30,
                    "linear_num_value_heads": 30},
    "lara_mini": {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                  "linear_value_head_dim": 128, "linear_num_key_heads": 8,
                  "linear_num_value_heads": 16},
    # BailingHybridConfig (5.24.0): lightning-style linear layers
    "bailing_hybrid": {"linear_conv_kernel_dim": 4, "linear_head_dim": 128,
                       "linear_num_heads": 32},
    # BambaConfig (4.57.6 and 5.24.0): GraniteMoeHybrid's Mamba-2 state
    "bamba": {"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256,
              "mamba_d_head": "auto", "mamba_d_conv": 4, "mamba_expand": 2},
    # FalconH1Config (4.57.6 and 5.24.0); mamba_d_ssm None: mamba_expand x hidden
    "falcon_h1": {"mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto",
                  "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4,
                  "mamba_expand": 2},
    # NemotronHConfig (5.24.0; mamba_n_groups and mamba_d_conv are old names
    # of n_groups and conv_kernel, which its __post_init__ reads)
    "nemotron_h": {"mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8,
                   "ssm_state_size": 128, "conv_kernel": 4},
    # RecurrentGemmaConfig (4.57.6, 5.24.0); lru_width None: hidden_size
    "recurrent_gemma": {"conv1d_width": 4, "lru_width": None},
    # Zamba2Config (4.57.6 and 5.24.0): a Mamba-2 mixer on every layer
    "zamba2": {"mamba_expand": 2, "mamba_ngroups": 1, "mamba_d_state": 64,
               "mamba_d_conv": 4, "n_mamba_heads": 8},
    "granitemoehybrid": {"mamba_n_heads": 128, "mamba_n_groups": 1,
                         "mamba_d_state": 256, "mamba_d_head": "auto",
                         "mamba_d_conv": 4, "mamba_expand": 2},
    # InklingTextConfig, Inkling2TextConfig, Inkling2LoopTextConfig (5.24.0):
    # the sizes of both kinds of layer and of the four convolution states
    "inkling": {"hidden_size": 6144, "head_dim": 128, "swa_num_key_value_heads": 16,
                "swa_head_dim": 128, "conv_kernel_size": 4},
    "inkling2": {"hidden_size": 4608, "head_dim": 128, "swa_num_key_value_heads": 8,
                 "swa_head_dim": 128, "conv_kernel_size": 4},
    "inkling2_loop": {"hidden_size": 2304, "head_dim": 128, "swa_num_key_value_heads": 8,
                      "swa_head_dim": 128, "conv_kernel_size": 4,
                      "loop_layer_index_start": 6, "loop_layer_index_end": 18,
                      "loop_num_passes": 3, "n_layers_per_attn_res_block": 6},
}
#: vLLM's default tokens per KV-cache block (``CacheConfig.DEFAULT_BLOCK_SIZE``,
#: ``vllm/config/cache.py`` at
#: vllm-project/vllm@002f10e0cfa1373a19a0d2756598a34b700d20e5).
VLLM_BLOCK_SIZE = 16
#: Where the vLLM conventions below are transcribed from.
VLLM_SOURCE = (
    "transcribed from vllm-project/vllm: vllm/v1/kv_cache_interface.py at "
    "001cabc1be16a59a70d720ed61a13b678c060a18 (FullAttentionSpec, SlidingWindowSpec, "
    "ChunkedLocalAttentionSpec, MLAAttentionSpec: page sizes and "
    "max_memory_usage_bytes) and vllm/model_executor/layers/attention/"
    "mla_attention.py at 90b0a26e0e1a8ae3ba34e9e0ea514411f1a6a182 (MLAAttention: "
    "head_size = kv_lora_rank + qk_rope_head_dim, num_kv_heads = 1); checked "
    "against a run of vLLM 0.33.0's own model classes and KV-cache specs "
    "(results/vllm-layers.json)")


#: Inkling's text models (see ``per_layer.INKLING``): every layer keeps keys
#: and values (a "hybrid_sliding" one the last ``sliding_window_size - 1``,
#: with the ``swa_*`` heads) and four float32 convolution states
#: (``LinearAttentionAndFullAttentionLayer`` and
#: ``LinearAttentionAndSlidingWindowAttentionLayer`` of 5.24.0's
#: ``cache_utils.py``).
INKLING = per_layer.INKLING


def _inkling_get(text: Mapping, model_type: str, key: str):
    """An Inkling size, through the class's aliases (``sconv_kernel_size``
    names ``conv_kernel_size`` and wins, as ``sliding_window`` does), else the
    class default."""
    alias = {"conv_kernel_size": "sconv_kernel_size"}.get(key)
    if alias is not None and alias in text:
        return _validate.positive_int(alias, text[alias])
    return _validate.positive_int(key, _state(text, model_type, key))


def _inkling_sliding_head(text: Mapping, model_type: str) -> dict:
    """What a "hybrid_sliding" layer caches per KV head: ``swa_head_dim``
    keys and values on ``swa_num_key_value_heads`` heads (``InklingAttention``
    and ``Inkling2SlidingAttention`` take the ``swa_*`` fields there)."""
    d = _inkling_get(text, model_type, "swa_head_dim")
    return {"kv_heads": _inkling_get(text, model_type, "swa_num_key_value_heads"),
            "key_dim": d, "value_dim": d}


def _inkling_loop(text: Mapping, kinds: list) -> list:
    """The cache layers Inkling 2 Loop appends at its first forward: the
    layers ``loop_layer_index_start`` to ``loop_layer_index_end`` once more
    for each further pass (``Inkling2LoopTextModel.forward``, the slice
    ``cache.layers[start:end]`` copied ``loop_num_passes - 1`` times; a
    ``loop_config``'s ``core_start``, ``core_end`` and ``num_passes`` override
    the three). The checks ``Inkling2LoopTextConfig.validate_architecture``
    makes are made here, with the same messages' fields."""
    loop = text.get("loop_config") if isinstance(text.get("loop_config"), Mapping) \
        else {}

    def field(key, override=None):
        value = loop.get(override, text.get(key)) if override else text.get(key)
        return _state(text, "inkling2_loop", key) if value is None else value

    start = _validate.nonnegative_int("loop_layer_index_start",
                                      field("loop_layer_index_start", "core_start"))
    end = _validate.nonnegative_int("loop_layer_index_end",
                                    field("loop_layer_index_end", "core_end"))
    passes = _validate.positive_int("loop_num_passes",
                                    field("loop_num_passes", "num_passes"))
    block = _validate.positive_int("n_layers_per_attn_res_block",
                                   field("n_layers_per_attn_res_block"))
    if start == 0 or start % block or end % block:
        raise ValueError(f"loop_layer_index_start ({start}) must be above 0, and it and "
                         f"loop_layer_index_end ({end}) multiples of "
                         f"n_layers_per_attn_res_block ({block}): "
                         f"Inkling2LoopTextConfig refuses the config")
    if end > len(kinds) and passes > 2 and start < len(kinds):
        raise ValueError(f"loop_layer_index_end ({end}) is past num_hidden_layers "
                         f"({len(kinds)}) with loop_num_passes {passes}: transformers "
                         f"5.24.0's model writes past its cache (an IndexError); give "
                         f"loop_layer_index_end <= num_hidden_layers")
    return list(kinds[start:end]) * (passes - 1)


def _mla(text: Mapping, model_type) -> dict | None:
    """The MLA sizes (DeepSeek-V2/V3, Kimi K2), or ``None`` for another model."""
    if model_type not in ("deepseek_v3", "deepseek_v2") and not (
            "kv_lora_rank" in text and "qk_rope_head_dim" in text):
        return None
    used = [k for k in MLA_DEFAULTS if text.get(k) is None]
    config_reader.warn_defaults(used, MLA_DEFAULTS, model_type, stacklevel=4)
    return {k: _validate.positive_int(k, text.get(k) if text.get(k) is not None
                                      else MLA_DEFAULTS[k]) for k in MLA_DEFAULTS}


def cache_head(config: Mapping) -> dict:
    """What one layer caches per token and KV head, as transformers 4.57.6 runs it.

    The head size is the one the rotary module uses (``head_dim``, else the
    config class's default, else ``hidden_size // num_attention_heads``; Granite
    4.0's attention always takes the latter). DeepSeek's MLA caches per head a
    key of ``qk_nope_head_dim + qk_rope_head_dim`` and a value of ``v_head_dim``
    (``DeepseekV3Attention`` decompresses the latent before caching).

    Returns:
        dict with ``kv_heads``, ``key_dim``, ``value_dim`` (per head) and, for
        MLA, ``mla`` (the four MLA sizes).
    """
    text, model_type = config_reader._text_config(config)
    # the table names a text model by its own type (qwen3_5_text), else the
    # composite's: the first of the two it lists
    table_type = next((t for t in (model_type, (model_type or "").removesuffix("_text"))
                       if t in _validate_config.KV_HEADS_DEFAULTS), None)
    model_type = (model_type or "").removesuffix("_text")
    _, heads = config_reader._one_of_aliases(text, config_reader._HEADS_ALIASES)
    heads = _validate.positive_int("num_attention_heads", heads)
    kv_heads = text.get("num_key_value_heads")
    if model_type in config_reader.MHA_ONLY:  # no class field; never read
        kv_heads = None
    if model_type == "falcon":  # FalconAttention.num_kv_heads
        kv_heads = (text.get("num_kv_heads") or heads) if (
            text.get("new_decoder_architecture") or not text.get("multi_query", True)) \
            else 1
    if kv_heads is None and model_type in ("deepseek_v3", "deepseek_v2"):
        kv_heads = heads  # DeepseekV3Attention expands its keys per query head
    elif kv_heads is None and table_type is not None \
            and "num_key_value_heads" not in text:
        # an absent field: the config class fills in its own default, not the
        # query heads (an explicit null is the query heads, or does not build)
        kv_heads = _validate_config.KV_HEADS_DEFAULTS[table_type]
        if heads % kv_heads:
            raise ValueError(
                f"num_key_value_heads is missing: transformers' {model_type} config "
                f"fills in {kv_heads}, which does not divide num_attention_heads="
                f"{heads}, so its attention fails; give num_key_value_heads")
    kv_heads = _validate.positive_int("num_key_value_heads",
                                      heads if kv_heads is None else kv_heads)
    mla = _mla(text, model_type)
    if mla is not None:
        return {"kv_heads": kv_heads, "mla": mla,
                "key_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
                "value_dim": mla["v_head_dim"]}
    if model_type == "cpmant":  # CpmAntAttention: its own dim_head (class default 128)
        d = _validate.positive_int("dim_head", text.get("dim_head", 128))
        return {"kv_heads": kv_heads, "key_dim": d, "value_dim": d}
    if model_type == "granitemoehybrid":  # GraniteMoeHybridAttention
        _, hidden = config_reader._one_of_aliases(text, config_reader._HIDDEN_ALIASES)
        head_dim = _validate.positive_int("hidden_size", hidden) // heads
    elif model_type in INKLING:  # the full layers' head; see _inkling_sliding_head
        head_dim = _inkling_get(text, model_type, "head_dim")
    elif model_type in ("zamba", "zamba2"):
        # ZambaAttention attends over [hidden, original embeddings]: its head is
        # attention_head_dim, by default 2 x hidden_size // heads (ZambaConfig)
        _, hidden = config_reader._one_of_aliases(text, config_reader._HIDDEN_ALIASES)
        head_dim = text.get("attention_head_dim")
        head_dim = _validate.positive_int(
            "attention_head_dim", 2 * _validate.positive_int("hidden_size", hidden)
            // heads if head_dim is None else head_dim)
    else:
        filled = config_reader._with_defaults(text, {}, model_type)
        filled.pop("qk_rope_head_dim", None)
        head_dim = config_reader._head_dim(filled)
    value_dim = text.get("v_head_dim")  # MiMo-V2-Flash: values narrower than keys
    if value_dim is None:
        value_dim = V_HEAD_DIM_DEFAULTS.get(model_type, head_dim)
    value_dim = _validate.positive_int("v_head_dim", value_dim)
    return {"kv_heads": kv_heads, "key_dim": head_dim, "value_dim": value_dim}


def _layer_heads(config: Mapping, layers: int) -> dict[int, dict]:
    """``{layer: cache_head}`` for the layers a 5.x heterogeneous config gives
    fields of their own (``per_layer_config``; Gemma 4's full-attention layers
    have a head of ``global_head_dim``), ``{}`` for any other config."""
    text, model_type = config_reader._text_config(config)
    overrides = config_reader.layer_overrides(text, model_type)
    out = {}
    for index, fields in overrides.items():
        if not 0 <= index < layers:
            raise ValueError(f"per_layer_config names layer {index}, but the model "
                             f"has {layers} layers")
        resolved = {**text, **fields, "per_layer_config": {}}
        layer = ({**config, "text_config": resolved}
                 if isinstance(config.get("text_config"), Mapping) else resolved)
        out[index] = cache_head(layer)
    return out


def _indexer(config: Mapping, kinds: list) -> dict | None:
    """The DSA indexer's key cache of transformers 5.x (see
    ``INDEXER_DEFAULTS``), or ``None`` for a model without one: the layers
    that keep it and the values each keeps per token."""
    raw = config.get("model_type")
    text, model_type = config_reader._text_config(config)
    name = raw if raw in INDEXER_DEFAULTS else (model_type or "").removesuffix("_text")
    if name not in INDEXER_DEFAULTS:
        return None
    field = INDEXER_FIELD.get(name, "index_head_dim")
    # Qwen4-Exp's class renames a full_attention layer indexed_attention
    indexed = [i for i, (kind, _) in enumerate(kinds)
               if kind == "indexed_attention" or (name == "deepseek_v32"
                                                  and kind not in NO_KV)
               or (name == "qwen4_exp" and kind == "full_attention")]
    dim = text.get(field)
    dim = INDEXER_DEFAULTS[name] if dim is None else dim
    if dim is None:
        if not indexed:
            return None
        raise ValueError(f"{name}: {field} is missing; its config class needs it for "
                         f"the {len(indexed)} indexed layers (the indexer's key width)")
    dim = _validate.positive_int(field, dim)
    own = text.get("indexer_types")
    if name == "hy_v4":  # HYV4Attention: a "shared" layer reuses an earlier indexer
        if own is None:  # HYV4Config's default
            own = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared"
                   for i in range(len(kinds))]
        if len(own) != len(kinds):
            raise ValueError(f"indexer_types has {len(own)} entries for "
                             f"{len(kinds)} layers")
        indexed = [i for i in indexed if own[i] != "shared"]
    return {"layers": len(indexed), "index_head_dim": dim,
            "float32": name in INDEXER_FLOAT32}


def _qwen4_ple(text: Mapping, get, hidden: int, layers: int) -> tuple[int, str]:
    """Qwen4-Exp's per-layer-embedding state (5.24.0
    ``models/qwen4_exp/modeling_qwen4_exp.py``): on each layer of
    ``ple_layer_ids`` (1-based, linear-attention layers) a short convolution
    of ``hc_count x hidden_size`` channels over ``(ple_conv_kernel_size - 1) x
    ngram_size`` steps (dilation ``ngram_size``), in the model's dtype; its
    int64 n-gram context is not sized. ``(values, words)``."""
    ids = text.get("ple_layer_ids") or []
    if not isinstance(ids, (list, tuple)):
        raise ValueError(f"ple_layer_ids must be a list of 1-based layer numbers, "
                         f"got {ids!r}")
    count = len({_validate.positive_int("ple_layer_ids[]", i) for i in ids})
    if not count:
        return 0, ""
    channels = _validate.positive_int("hc_count", get("hc_count")) * hidden
    steps = (_validate.positive_int("ple_conv_kernel_size", get("ple_conv_kernel_size"))
             - 1) * _validate.positive_int("ngram_size", get("ngram_size"))
    return count * channels * steps, (f"; on each of the {count} PLE layers a "
                                       f"convolution state of {channels} x {steps} "
                                       f"values")


#: ``DeepseekV4Config``'s compression rates per layer type (5.24.0).
DEEPSEEK_V4_RATES = {"compressed_sparse_attention": 4,
                     "heavily_compressed_attention": 128}


def _deepseek_v4_cache(text: Mapping, kinds: list, b: int) -> dict:
    """DeepSeek-V4's cache in transformers 5.24.0, one sequence
    (``models/deepseek_v4/modeling_deepseek_v4.py``: ``DeepseekV4HCACache``,
    ``DeepseekV4CSACache``; the sliding layers' ``DynamicSlidingWindowLayer``
    in ``cache_utils.py``). ``head_dim`` D, ``index_head_dim`` I, window W
    (``sliding_window``; a layer keeps ``min(n, W - 1)`` of its last tokens,
    every one where W is 1), one key head whatever ``num_key_value_heads``
    says, the keys serving as values:

    * sliding layer: keys and values stored apart, ``2 x kept x D``;
    * heavily compressed layer, rate r: ``kept x D``, one compressed entry of
      D per r tokens, and the ``n mod r`` tokens of the open block twice
      (values and gates);
    * compressed sparse layer, rate m: ``kept x D``, one entry of ``D + I``
      (attention and indexer) per m tokens, the open block's ``4 x (n mod
      m)`` values of ``D + I``, and once ``n >= m`` the last block's overlap,
      ``m x (D + I)`` values and as many gates, kept in float32.

    Measured with the helper's tiny models on 24 generated configs at 1 to 300
    tokens (2,582 layers, 0 differences) and judged here by the stored
    config-forms sweep. Returns ``({kind: info}, bytes_at)``, ``bytes_at(kind,
    n)`` the bytes of all layers of that kind at n tokens."""
    def size(key, default):
        value = text.get(key)
        return _validate.positive_int(key, default if value is None else value)

    d, i, w = size("head_dim", 512), size("index_head_dim", 128), size("sliding_window", 128)
    rates = text.get("compress_rates")
    rates = dict(DEEPSEEK_V4_RATES) if rates is None else dict(rates)
    for kind, key in (("compressed_sparse_attention", "compress_rate_csa"),
                      ("heavily_compressed_attention", "compress_rate_hca")):
        if text.get(key) is not None:
            rates[kind] = text[key]
    out: dict = {}
    for kind, _ in kinds:
        info = out.setdefault(kind, {"layers": 0, "window": w, "cap": None, "kv": True})
        info["layers"] += 1
    # a window of 1 keeps every token (the cache's [-0:] slice): it grows too
    grows = 1 if w == 1 else 0
    for kind, info in out.items():
        if kind == "sliding_attention":
            info.update(bytes_per_token=grows * info["layers"] * 2 * d * b, rate=None)
            continue
        if kind not in rates:
            raise ValueError(f"compress_rates has no rate for {kind} (DeepseekV4Config "
                             f"does not merge a given dict with its defaults)")
        r = _validate.positive_int(f"compress_rates[{kind!r}]", rates[kind])
        width = d + i if kind == "compressed_sparse_attention" else d
        info.update(rate=r, bytes_per_token=info["layers"] * (width * b / r
                                                               + grows * d * b))

    def bytes_at(kind, n):
        kept = n if w == 1 else min(n, w - 1)
        if kind == "sliding_attention":
            return 2 * kept * d * b
        r = out[kind]["rate"]
        if kind == "heavily_compressed_attention":
            return kept * d * b + (n // r) * d * b + 2 * (n % r) * d * b
        return (kept * d * b + (n // r) * (d + i) * b + 4 * (n % r) * (d + i) * b
                + (r * (d + i) * (b + 4) if n >= r else 0))

    return out, lambda kind, n: out[kind]["layers"] * bytes_at(kind, n)


def _state(text: Mapping, model_type: str, key: str):
    value = text.get(key)
    return STATE_DEFAULTS[model_type][key] if value is None else value


def _release(config: Mapping, version: str | None) -> str | None:
    """``version``; where it is ``None`` (the installed transformers) and only
    transformers 5.x registers the config's model type, 5.x: 4.57.6 cannot
    build such a model, so its cache is the one 5.x fills (GLM-5's latent
    and indexer keys, not 4.57.6's decompressed keys, 46 times larger)."""
    if version is not None or not isinstance(config, Mapping) or \
            config.get("model_type") in config_reader.MODEL_TYPE_ALIASES:
        return version  # DeepSeek-V3.2, Kimi K2: 4.57.6 runs them as DeepSeek-V3
    types = {config.get("model_type")}
    text = config.get("text_config")
    if isinstance(text, Mapping):
        types.add(text.get("model_type"))
    only = {config_reader._only_release(t) for t in types if isinstance(t, str)}
    return MIMICKED_VERSIONS[5] if 5 in only and 4 not in only else None


def fixed_state_bytes(config: Mapping, *, bytes_per_value: int = 2,
                      engine: str = "transformers",
                      transformers_version: str | None = None) -> dict | None:
    """The length-independent state an engine keeps per sequence for layers
    without keys and values, or ``None`` for a model without such layers.

    ``engine="vllm"`` (a transcription of ``MambaStateShapeCalculator`` in
    ``vllm/model_executor/layers/mamba/mamba_utils.py`` at
    vllm-project/vllm@2afe1e8573cf51b73569ae1d35f59078a2032a91, with the fields
    the model files pass to it: ``qwen3_next.py`` at 6365b387890f7aa74b0fe65b
    81705d4730fcc763, ``granitemoehybrid.py`` at fc41bfe8ebdbe69a333da8eeb0c17b
    f22741d1d4, ``lfm2.py``; one tensor-parallel rank, no speculative tokens,
    the state in the model's dtype, ``mamba_cache_dtype="auto"``): only the
    layers without attention keep a state; a convolution keeps ``kernel - 1``
    steps (LFM2: ``(conv_L_cache - 1) x hidden_size``); Qwen3-Next's
    recurrent state and Granite's SSM state are in the model's dtype. One copy
    per request; with prefix caching (``mamba_cache_mode="align"``) vLLM may
    hold two, and pages padded to the attention page size are not modelled.

    ``engine="transformers"`` (4.57.6):

    - LFM2 (``Lfm2HybridConvCache``): ``hidden_size x conv_L_cache`` values on
      every layer, attention layers included (the class allocates all of them);
    - Qwen3-Next (``Qwen3NextDynamicCache``), per linear-attention layer: a
      convolution state of ``(2 x key heads x key dim + value heads x value dim)
      x linear_conv_kernel_dim`` values and a recurrent state of ``value heads x
      key dim x value dim`` values kept in float32 (4 bytes) by transformers'
      torch implementation of the gated delta rule;
    - Granite 4.0 (``HybridMambaAttentionDynamicCache``), per Mamba layer: a
      convolution state of ``(mamba_expand x hidden_size + 2 x mamba_n_groups x
      mamba_d_state) x mamba_d_conv`` and an SSM state of ``mamba_n_heads x
      mamba_d_head x mamba_d_state`` values.

    ``engine="transformers"`` with ``transformers_version`` 5.x (5.24.0; default:
    the installed transformers, see :func:`mimicked_transformers_version`):
    LFM2 has no cache class of its own; ``DynamicCache`` gives each ``conv``
    layer a ``LinearAttentionLayer`` holding ``hidden_size x conv_L_cache``
    values and attention layers none (``DYNAMIC_LAYER_TYPE_MAPPING`` and
    ``LinearAttentionLayer.lazy_initialization`` in ``cache_utils.py`` lines
    1469-1484 and 1218-1234; ``Lfm2ShortConv.forward`` passes
    ``conv_kernel_size=conv_L_cache``, ``models/lfm2/modeling_lfm2.py`` lines
    326 and 369-372). Granite 4.0's SSM state is stored as its torch path
    computes it, in float32 whatever the model's dtype (``A`` is float32 in
    ``GraniteMoeHybridMambaLayer``; measured in bfloat16 by
    ``scripts/state_dtypes.py``). The other models as in 4.57.6. Models only 5.x has:
    Qwen3.5, OLMo-hybrid and LaRA-mini keep Qwen3-Next's gated-DeltaNet state
    per linear-attention layer (``GATED_DELTANET``); Bailing-hybrid a
    convolution state of ``3 x linear_num_heads x linear_head_dim x
    linear_conv_kernel_dim`` values and a float32 recurrent state of
    ``linear_num_heads x linear_head_dim²``; ZAYA, on every layer, its CCA
    convolution and delayed values. Falcon-H1 (``FalconHybridMambaAttentionDynamicCache``
    in 4.57.6), on every layer beside its keys and values: a convolution state
    of ``(mamba_d_ssm + 2 x mamba_n_groups x mamba_d_state) x mamba_d_conv``
    and an SSM state of ``mamba_n_heads x mamba_d_head x mamba_d_state``
    values (5.24.0: the SSM state in float32). Each is checked against the filled cache
    of a tiny model by the conformance sweep (``make conformance``). Under
    ``engine="vllm"`` only the models of ``VLLM_STATE_TYPES`` are sized
    (``None`` for the others). LFM3 and LFM2-MoE (5.x only) keep LFM2's 5.x state.

    Returns:
        dict with ``bytes`` (per sequence), ``layers`` (how many hold it) and
        ``what`` (the parts, in words).
    """
    transformers_version = _release(config, transformers_version)
    with config_reader.reading_release(transformers_version):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        text, model_type = config_reader._text_config(config)
        model_type = (model_type or "").removesuffix("_text")
        if model_type not in STATE_DEFAULTS or (engine == "vllm"
                                                 and model_type not in VLLM_STATE_TYPES):
            return None  # (vLLM: only the states transcribed from its source)
        layout = _layout(config, engine)
        b = _validate.positive_int("bytes_per_value", bytes_per_value)
        _, hidden = config_reader._one_of_aliases(text, config_reader._HIDDEN_ALIASES)

        def get(key):
            return _state(text, model_type, key)

        if model_type == "cpmant":
            # CpmAntModel puts prompt_length prompt tokens before every input: their
            # keys and values sit in the cache of every layer whatever the length
            head = cache_head(config)
            tokens = _validate.nonnegative_int("prompt_length", get("prompt_length"))
            if any(kind in ("sliding_attention", "chunked_attention")
                   for kind, _ in _cache_kinds(config, engine)[0]):
                # a window key CpmAntConfig does not define still makes its
                # DynamicCache slide (keeping the last W - 1 of prompt and input
                # alike; measured with 4.57.6 and 5.24.0)
                raise ValueError("cpmant: sliding_window, attention_chunk_size or "
                                 "layer_types (keys CpmAntConfig does not define) make "
                                 "its cache slide over the prompt tokens and the input "
                                 "alike, which is not modelled; drop them")
            layers = len(layout)  # every layer caches them
            per = head["kv_heads"] * (head["key_dim"] + head["value_dim"]) * b
            what = (f"the keys and values of the {tokens} prompt tokens CPM-Ant puts "
                    f"before every input, on each of the {layers} layers")
            return {"bytes": layers * tokens * per, "layers": layers, "what": what}
        if model_type in INKLING:
            # every layer, full or sliding, holds number_of_conv_states = 4
            # convolution states of conv_kernel_size steps in float32 (the
            # model casts to float before update_conv_state, and a bfloat16
            # checkpoint keeps its convolutions in float32): the keys' and the
            # values' (that layer's KV heads x head size channels), and the ones
            # after the attention and after the MLP (hidden_size channels)
            kinds = [kind for kind, _ in _cache_kinds(config, engine)[0]]
            steps = _inkling_get(text, model_type, "conv_kernel_size")
            hidden = _validate.positive_int(
                "hidden_size", hidden if hidden is not None else get("hidden_size"))
            full, sliding = cache_head(config), _inkling_sliding_head(text, model_type)
            per = {kind: 4 * steps * (2 * h["kv_heads"] * h["key_dim"] + 2 * hidden)
                   for kind, h in (("hybrid", full), ("hybrid_sliding", sliding))}
            what = (f"per layer four float32 convolution states of {steps} steps: keys "
                    f"and values ({full['kv_heads'] * full['key_dim']} channels each on "
                    f"hybrid layers, {sliding['kv_heads'] * sliding['key_dim']} on "
                    f"hybrid_sliding ones) and the attention's and MLP's outputs "
                    f"({hidden} channels each)")
            other = sorted({k for k in kinds if k not in per})
            if other:  # 5.x's model calls update_conv_state on every layer
                raise ValueError(
                    f"{model_type}'s layers are 'hybrid' or 'hybrid_sliding', each with "
                    f"convolution states; this config names {other}, on which "
                    f"transformers 5.x's model fails (a layer without them); use "
                    f"those two names")
            return {"bytes": sum(per[k] for k in kinds), "layers": len(kinds),
                    "what": what}
        if model_type == "zaya":
            # ZayaCCA, per layer beside its keys and values: the q/k convolution's
            # last (cca_time0 - 1) + (cca_time1 - 1) inputs and half a value head
            # per KV head of delayed values (5.24.0 models/zaya/modeling_zaya.py,
            # get_conv_state / get_recurrent_state)
            head = cache_head(config)
            heads = _validate.positive_int("num_attention_heads",
                                           text.get("num_attention_heads"))
            channels = (heads + head["kv_heads"]) * head["key_dim"]
            steps = get("cca_time0") - 1 + get("cca_time1") - 1
            delayed = head["kv_heads"] * head["key_dim"] // 2
            layers = len(layout)  # every ZAYA layer keeps one
            what = (f"per layer a convolution state of {channels} x {steps} values and "
                    f"{delayed} delayed values (ZAYA's CCA, as transformers 5.x keeps it)")
            return {"bytes": layers * (channels * steps + delayed) * b, "layers": layers,
                    "what": what}
        if engine == "vllm":
            return _vllm_state(model_type, [x.attention for x in layout], hidden, get, b)
        if model_type in ("lfm3", "lfm2_moe") or (model_type == "lfm2"
                                                  and _major(transformers_version) == 5):
            layers = [x.attention for x in layout].count("conv")
            per = hidden * get("conv_L_cache") * b
            what = (f"per convolution layer a convolution state of {hidden} x "
                    f"{get('conv_L_cache')} values (transformers 5.x's DynamicCache: "
                    f"none on attention layers)")
            return {"bytes": layers * per, "layers": layers, "what": what}
        if model_type == "lfm2":
            layers = len(layout)
            per = hidden * get("conv_L_cache") * b
            what = (f"convolution state {hidden} x {get('conv_L_cache')} values on each "
                    f"of the {layers} layers (Lfm2HybridConvCache allocates it on "
                    f"attention layers too)")
            return {"bytes": layers * per, "layers": layers, "what": what}
        kinds = [x.attention for x in layout]
        if model_type == "minimax":  # MiniMaxCache: one (heads, d, d) state per linear layer
            layers = kinds.count("linear_attention")
            heads = text.get("num_attention_heads")
            d = cache_head(config)["key_dim"]
            what = (f"per linear-attention layer a lightning-attention state of {heads} "
                    f"x {d} x {d} values")
            return {"bytes": layers * heads * d * d * b, "layers": layers, "what": what}
        if model_type in GATED_DELTANET:
            layers = kinds.count("linear_attention")
            kh, vh = get("linear_num_key_heads"), get("linear_num_value_heads")
            kd, vd = get("linear_key_head_dim"), get("linear_value_head_dim")
            conv = (2 * kh * kd + vh * vd) * get("linear_conv_kernel_dim")
            per = conv * b + vh * kd * vd * 4
            what = (f"per linear-attention layer a convolution state of {conv:,} values "
                    f"and a recurrent state of {vh} x {kd} x {vd} float32 values")
            if model_type == "qwen4_exp":
                ple, more = _qwen4_ple(text, get, hidden, layers)
                return {"bytes": layers * per + ple * b, "layers": layers,
                        "what": what + more}
            return {"bytes": layers * per, "layers": layers, "what": what}
        if model_type == "bailing_hybrid":
            layers = kinds.count("linear_attention")
            heads, d = get("linear_num_heads"), get("linear_head_dim")
            conv = 3 * heads * d * get("linear_conv_kernel_dim")
            what = (f"per linear-attention layer a convolution state of {conv:,} values "
                    f"(q, k and v) and a recurrent state of {heads} x {d} x {d} float32 "
                    f"values")
            return {"bytes": layers * (conv * b + heads * d * d * 4), "layers": layers,
                    "what": what}
        if model_type == "nemotron_h":
            # NemotronHMamba2Mixer (5.24.0), per Mamba-2 block: a convolution state
            # of (mamba_num_heads x mamba_head_dim + 2 x n_groups x ssm_state_size)
            # x conv_kernel values in the model's dtype and an SSM state of
            # mamba_num_heads x mamba_head_dim x ssm_state_size in float32 (the torch
            # path computes it so, whatever mamba_ssm_cache_dtype says; measured
            # in float32 and bfloat16 on 5.24.0's tiny models)
            layers = kinds.count("linear_attention")
            legacy = {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv"}
            size = {k: _validate.positive_int(k, text.get(legacy.get(k, k), get(k))
                                              if text.get(k) is None else text[k])
                    for k in STATE_DEFAULTS["nemotron_h"]}
            inner = size["mamba_num_heads"] * size["mamba_head_dim"]
            conv = (inner + 2 * size["n_groups"] * size["ssm_state_size"]) \
                * size["conv_kernel"]
            ssm = inner * size["ssm_state_size"]
            what = (f"per Mamba-2 block a convolution state of {conv:,} values and an "
                    f"SSM state of {ssm:,} float32 values")
            return {"bytes": layers * (conv * b + ssm * 4), "layers": layers,
                    "what": what}
        if model_type == "recurrent_gemma":
            # RecurrentGemmaRecurrentBlock (4.57.6 and 5.24.0), per recurrent
            # layer: the RG-LRU state (lru_width values, "always computed in full
            # precision": float32) and the convolution's last conv1d_width - 1
            # inputs (lru_width channels, the model's dtype)
            layers = kinds.count("linear_attention")
            lru = text.get("lru_width")
            lru = _validate.positive_int("lru_width", hidden if lru is None else lru)
            steps = _validate.positive_int("conv1d_width", get("conv1d_width")) - 1
            what = (f"per recurrent layer an RG-LRU state of {lru} float32 values and "
                    f"a convolution state of {lru} x {steps} values")
            return {"bytes": layers * (lru * 4 + lru * steps * b), "layers": layers,
                    "what": what}
        if model_type == "falcon_h1":
            # FalconHybridMambaAttentionDynamicCache (4.57.6), per layer: a
            # convolution state of (d_ssm + 2 x n_groups x d_state) x d_conv and an
            # SSM state of n_heads x d_head x d_state, in the model's dtype; 5.24.0
            # keeps the same per layer in its DynamicCache, the SSM state in float32
            # (as Granite's). A mamba_d_ssm of null means mamba_expand x hidden_size.
            layers = len(layout)  # every Falcon-H1 layer
            inner = text.get("mamba_d_ssm", STATE_DEFAULTS["falcon_h1"]["mamba_d_ssm"])
            inner = int(get("mamba_expand") * hidden) if inner is None else inner
            inner = _validate.positive_int("mamba_d_ssm", inner)
            d_head = get("mamba_d_head")
            d_head = inner // get("mamba_n_heads") if d_head == "auto" else d_head
            conv = (inner + 2 * get("mamba_n_groups") * get("mamba_d_state")) \
                * get("mamba_d_conv")
            ssm = get("mamba_n_heads") * d_head * get("mamba_d_state")
            ssm_bytes = b if _major(transformers_version) < 5 else 4
            what = (f"per layer (beside its keys and values) a Mamba convolution state "
                    f"of {conv:,} values and an SSM state of {ssm:,} values"
                    + (" in float32" if ssm_bytes == 4 and b != 4 else ""))
            return {"bytes": layers * (conv * b + ssm * ssm_bytes), "layers": layers,
                    "what": what}
        if model_type == "zamba2":
            # Zamba2MambaMixer on every layer, the hybrid ones too (each
            # Zamba2HybridLayer holds a Zamba2MambaDecoderLayer): a convolution
            # state of (mamba_expand x hidden + 2 x mamba_ngroups x mamba_d_state)
            # x mamba_d_conv and an SSM state of mamba_expand x hidden x mamba_d_state
            # (n_mamba_heads x mamba_headdim x mamba_d_state) values
            # the SSM state in the model's dtype in 4.57.6, in float32 in 5.24.0
            # (results/state-dtypes-4.json; results/generated-caches-5.json)
            inner = get("mamba_expand") * hidden
            return _mamba2_state(
                len(kinds), (inner + 2 * get("mamba_ngroups") * get("mamba_d_state"))
                * get("mamba_d_conv"), inner * get("mamba_d_state"), b,
                transformers_version, "per layer a Mamba-2")
        # transformers 5.x's GraniteMoeHybridConfig names its Mamba layers
        # "linear_attention" in layer_types (4.57: "mamba")
        layers = kinds.count("mamba") + kinds.count("linear_attention")
        inner = get("mamba_expand") * hidden
        d_head = get("mamba_d_head")
        d_head = inner // get("mamba_n_heads") if d_head == "auto" else d_head
        conv = (inner + 2 * get("mamba_n_groups") * get("mamba_d_state")) * get("mamba_d_conv")
        ssm = get("mamba_n_heads") * d_head * get("mamba_d_state")
        # 5.x's DynamicCache keeps the SSM state as the layer computes it: in
        # float32 (A is float32 in GraniteMoeHybridMambaLayer's torch path);
        # 4.57.6's HybridMambaAttentionDynamicCache allocates the model's dtype
        return _mamba2_state(layers, conv, ssm, b, transformers_version,
                             "per Mamba layer a")


def _mamba2_state(layers: int, conv: int, ssm: int, b: int, version, what: str
                  ) -> dict:
    """A Mamba-2 state per layer (Granite 4.0, Zamba2): ``conv`` values of
    convolution state in the model's dtype (``b`` bytes) and ``ssm`` values of
    SSM state, in the model's dtype in transformers 4.57.6, in float32 in 5.x."""
    ssm_bytes = 4 if _major(version) == 5 else b
    return {"bytes": layers * (conv * b + ssm * ssm_bytes), "layers": layers,
            "what": f"{what} convolution state of {conv:,} values and an SSM state of "
                    f"{ssm:,} values" + (" in float32" if ssm_bytes == 4 and b != 4
                                         else "")}


def _vllm_state(model_type: str, kinds: list, hidden: int, get, b: int) -> dict:
    """vLLM's per-request state of the layers without attention (see
    :func:`fixed_state_bytes`; a transcription)."""
    if model_type == "lfm2":
        layers = kinds.count("conv")
        per = (get("conv_L_cache") - 1) * hidden * b
        what = (f"per convolution layer {get('conv_L_cache') - 1} x {hidden} values "
                f"(vLLM's short_conv state)")
    elif model_type == "qwen3_next":
        layers = kinds.count("linear_attention")
        kh, vh = get("linear_num_key_heads"), get("linear_num_value_heads")
        kd, vd = get("linear_key_head_dim"), get("linear_value_head_dim")
        conv = (get("linear_conv_kernel_dim") - 1) * (2 * kh * kd + vh * vd)
        per = (conv + vh * kd * vd) * b
        what = (f"per linear-attention layer a convolution state of {conv:,} values "
                f"and a recurrent state of {vh} x {kd} x {vd} values (vLLM's "
                f"gated_delta_net state, in the model's dtype)")
    else:
        layers = kinds.count("mamba") + kinds.count("linear_attention")
        inner = get("mamba_expand") * hidden
        d_head = get("mamba_d_head")
        d_head = inner // get("mamba_n_heads") if d_head == "auto" else d_head
        conv = (get("mamba_d_conv") - 1) * (inner + 2 * get("mamba_n_groups")
                                            * get("mamba_d_state"))
        ssm = get("mamba_n_heads") * d_head * get("mamba_d_state")
        per = (conv + ssm) * b
        what = (f"per Mamba layer a convolution state of {conv:,} values and an SSM "
                f"state of {ssm:,} values (vLLM's mamba2 state)")
    return {"bytes": layers * per, "layers": layers, "what": what}


def _layout(config: Mapping, engine: str = "transformers") -> list:
    with warnings.catch_warnings():  # the inspector reports the defaults once
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        if engine == "vllm":
            return _vllm_layout(config)
        return per_layer.layer_layout(config)


#: vLLM 0.33.0 model classes (by the text config's model type; a multimodal
#: class by its language model's) that give each layer a window of its own
#: from ``config.layer_types``: a
#: ``"sliding_attention"`` entry gets ``config.sliding_window``, any other the
#: engine's model-level window (``llama.py``, ``gemma2.py``, ``gemma3.py``,
#: ``gpt_oss.py``, ... pass ``per_layer_sliding_window``; the other classes
#: and vLLM's Transformers backend as measured). Measured by building each
#: class with vLLM's own code (``scripts/engines/vllm_layers.py``,
#: ``results/vllm-layers.json``); ``tests/test_vllm_layers.py`` compares.
VLLM_LAYER_TYPED = frozenset({
    "apertus", "arcee", "aria", "beam", "cohere2", "cohere2_moe", "cwm", "ernie4_5",
    "exaone4", "exaone_moe", "flex_olmo", "gemma2", "gemma3", "gemma3n", "gemma4",
    "gemma4_unified", "glm", "gpt_bigcode", "gpt_neox", "gpt_oss", "granite",
    "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "jais2", "kolibri1", "laguna", "llama",
    "mellum", "ministral3", "mistral", "muse_glimmer", "olmo", "olmo2", "olmo3",
    "paddleocr_vl", "phi", "phi3", "seed_oss", "smollm3", "starcoder2",
    "vaultgemma"})
#: vLLM classes whose sliding layers attend over ``sliding_window + 1`` tokens
#: and keep that many: "cohere swa layer sees [pos - sliding_window, pos]"
#: (``vllm/model_executor/models/commandr.py``, Cohere2 and its MoE).
VLLM_WINDOW_PLUS_ONE = frozenset({"cohere2", "cohere2_moe"})
#: vLLM classes that build their attention without the cache config (Falcon's
#: rotary and ALiBi attention, ``vllm/model_executor/models/falcon.py``,
#: ``FalconAttention``): no layer gets the engine's window, and the cache
#: holds the model's dtype whatever ``--kv-cache-dtype`` says.
VLLM_WITHOUT_CACHE_CONFIG = frozenset({"falcon"})
#: Config types with MLA fields that vLLM runs as ordinary attention, one key
#: and value head per query head (``minicpm3.py``: the latent is decompressed
#: before the cache).
VLLM_MLA_DECOMPRESSED = frozenset({"minicpm3"})
#: vLLM 0.33.0 language models built on its ``Qwen2Model``
#: (``vllm/model_executor/models/qwen2.py``; Qwen3's model and the Qwen2-VL,
#: Qwen2.5-VL and Qwen3-VL language models extend it), by the text config's
#: model type: where the config's layer types differ, ``Qwen2Model.__init__``
#: asserts ``max_window_layers == num_hidden_layers`` before any weight loads.
#: Measured, as :data:`VLLM_LAYER_TYPED` (``tests/test_vllm_layers.py``).
VLLM_QWEN2_MODEL = frozenset({"qwen2", "qwen3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl"})
#: vLLM 0.33.0 language models of gated DeltaNet and full attention layers
#: (``qwen3_next.py``, ``qwen3_5.py``; MiniCPM-V 4.6 and 4.7 build Qwen3.5's):
#: their decoder layer raises on any other layer type. Measured, as
#: :data:`VLLM_QWEN2_MODEL`.
VLLM_GATED_DELTA_NET = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe"})
#: ``max_window_layers`` of the text config classes of :data:`VLLM_QWEN2_MODEL`
#: that per_layer's defaults do not hold (``Qwen2VLTextConfig``,
#: ``Qwen2_5_VLTextConfig``); Qwen3-VL's class has no such field.
VLLM_QWEN2_MAX_WINDOW_LAYERS = {"qwen2_vl": 80, "qwen2_5_vl": 80}
#: Config classes of transformers 5.x that null ``sliding_window`` unless
#: ``use_sliding_window`` is true (their ``__post_init__``); vLLM reads the
#: nulled attribute.
WINDOW_SWITCHED = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})


def _vllm_head(text: Mapping, model_type: str, head: dict,
               mla: dict | None) -> tuple[dict, dict | None]:
    """What one vLLM layer caches per token and KV head, where its class
    differs from transformers': MiniCPM3 (``minicpm3.py``) decompresses MLA and
    caches one head per query head, keys of ``qk_nope_head_dim +
    qk_rope_head_dim`` and values padded to that size; Zamba2's attention
    (``zamba2.py``, ``Zamba2Attention``) has no grouped KV heads."""
    model_type = model_type.removesuffix("_text")
    heads = text.get("num_attention_heads")
    if model_type in VLLM_MLA_DECOMPRESSED and mla is not None:
        dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        return ({"kv_heads": _validate.positive_int("num_attention_heads", heads),
                 "key_dim": dim, "value_dim": dim}, None)
    if model_type == "zamba2":
        return {**head, "kv_heads": _validate.positive_int("num_attention_heads",
                                                           heads)}, mla
    return head, mla


def _vllm_layout(config: Mapping) -> list:
    """The layers as vLLM 0.33.0 builds them (a run of its model classes,
    :data:`VLLM_LAYER_TYPED`), each with the window its KV-cache spec keeps.

    vLLM reads the config through transformers (5.16 to 5.20 for vLLM 0.33.0;
    the layer types a 5.x class fills in, or a ``layer_types`` key any class
    keeps as an attribute). Its engine-wide window is the config's
    ``sliding_window`` where the config has no layer types, or all are
    sliding (``EngineArgs.create_engine_config``, ``vllm/engine/arg_utils.py``);
    a layer its class gives no window of its own takes that one. MLA layers
    never slide; Llama 4 takes its chunked layers from ``no_rope_layers``."""
    with config_reader.reading_release(MIMICKED_VERSIONS[5]), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.IgnoredKeyWarning)
        text, raw_type = config_reader._text_config(config)
        model_type = (raw_type or "").removesuffix("_text")
        if model_type == "deepseek_v4":
            # deepseek_v4.py: per layer a sliding fp8 MLA cache, the compressed
            # MLA cache, the compressor's state and, on compressed sparse layers,
            # the indexer's keys and state, each in blocks of its own size
            raise ValueError(
                "vLLM 0.33.0 keeps DeepSeek-V4's cache in up to five caches per "
                "layer (a sliding fp8 latent cache, the compressed latents, the "
                "compressor's state, the indexer's keys and state), which this "
                "library does not model; size it with engine='transformers', or "
                "read vLLM's own KV-cache specs")
        if model_type == "llama4":  # llama4.py: chunked by no_rope_layers, never
            text = {k: v for k, v in text.items() if k != "layer_types"}  # the key
            return per_layer.layer_layout({**text, "model_type": raw_type})
        layout = per_layer.layer_layout(config, key_layer_types=True)
        defines = raw_type not in per_layer._key_only_types()[5]
        types = ([x.attention for x in layout]
                 if defines or text.get("layer_types") is not None else None)
        window = text.get("sliding_window", per_layer.LAYER_DEFAULTS.get(
            model_type, {}).get("sliding_window"))
        if model_type in WINDOW_SWITCHED and not text.get("use_sliding_window"):
            window = None
        window = window or None  # vLLM: a window of 0 is none
        if model_type in VLLM_QWEN2_MODEL and types is not None and \
                len(set(types)) > 1:
            first = per_layer._field(text, model_type, "max_window_layers", [])
            if first is None:
                first = VLLM_QWEN2_MAX_WINDOW_LAYERS.get(model_type)
            if first is None:
                # Qwen2Model.__init__ reads config.max_window_layers, which
                # Qwen3VLTextConfig neither defines nor was given
                raise ValueError(
                    f"vLLM 0.33.0 fails on this {model_type} config: its layers mix "
                    f"{' and '.join(sorted(set(types)))}, so vLLM's Qwen2 model reads "
                    f"max_window_layers, which the config does not set and its "
                    f"class does not define (AttributeError); serve it with "
                    f"transformers, or make every layer one type")
            if first != len(layout):
                # Qwen2Model.__init__ (vllm/model_executor/models/qwen2.py), which
                # Qwen3's model extends: an assertion, before any weight loads
                raise ValueError(
                    f"vLLM 0.33.0 refuses this {model_type} config: its layers mix "
                    f"{' and '.join(sorted(set(types)))} while max_window_layers "
                    f"({first}) is not num_hidden_layers ({len(layout)}) (\"Sliding "
                    f"window for some but all layers is not supported\"); serve it "
                    f"with transformers, or make every layer one type")
        if model_type in VLLM_GATED_DELTA_NET and types is not None and \
                not set(types) <= {"full_attention", "linear_attention"}:
            # Qwen3NextDecoderLayer.__init__ (vllm/model_executor/models/
            # qwen3_next.py), Qwen3.5's (qwen3_5.py): any other layer type raises
            raise ValueError(
                f"vLLM 0.33.0 refuses this {model_type} config: its layers are "
                f"'full_attention' or 'linear_attention', got "
                f"{sorted(set(types) - {'full_attention', 'linear_attention'})} "
                f"(\"Invalid layer_type\")")
        if model_type == "zamba2" and types is not None and \
                not set(types) <= {"mamba", "hybrid", "linear_attention"}:
            raise ValueError(
                f"zamba2's layers are 'mamba' (or 'linear_attention') and "
                f"'hybrid', got {sorted(set(types))}: vLLM 0.33.0 builds such a "
                f"config with attention its layer list does not name (the KV "
                f"cache is not modelled); use layers_block_type's own names")
        engine_wide = window if types is None or all(
            t == "sliding_attention" for t in types) else None
        mla = _mla(text, model_type) is not None and \
            model_type not in VLLM_MLA_DECOMPRESSED
        out = []
        for i, layer in enumerate(layout):
            kind = layer.attention
            if types is not None and model_type in ("lfm2", "lfm2_moe", "zamba2"):
                # lfm2_moe.py: a layer attends where layer_types says
                # "full_attention", else it convolves; zamba2.py: a "hybrid"
                # entry attends (beside its Mamba block), any other is Mamba
                attends = types[i] == ("hybrid" if model_type == "zamba2"
                                       else "full_attention")
                kind = layer.attention if attends else (
                    "mamba" if model_type == "zamba2" else "conv")
                if kind in NO_KV:
                    out.append(dataclasses.replace(layer, attention=kind, window=None))
                    continue
            if kind in NO_KV or kind == "cross_attention":
                out.append(layer)
                continue
            own = None
            if model_type in VLLM_LAYER_TYPED and types is not None and \
                    types[i] == "sliding_attention" and window is not None:
                own = window + (model_type in VLLM_WINDOW_PLUS_ONE)
            w = None if mla or model_type in VLLM_WITHOUT_CACHE_CONFIG else (
                own if own is not None else engine_wide)
            out.append(dataclasses.replace(
                layer, attention="sliding_attention" if w else "full_attention",
                window=w))
        return out


def _cache_kinds(config: Mapping, engine: str) -> tuple[list[tuple[str, int | None]],
                                                          str]:
    """Per cache layer: the cache kind (a layer type) and the window it keeps,
    or ``None``; and where the kinds come from. A cache may hold more layers
    than the model (Dory's and Inkling 2 Loop's looped layers: one copy per
    further pass)."""
    kinds, source = _layer_cache_kinds(config, engine)
    text, model_type = config_reader._text_config(config)
    if (model_type or "").removesuffix("_text") == "inkling2_loop":
        return (kinds + _inkling_loop(text, kinds),
                source + "; a copy of the looped layers for each further pass")
    if model_type != "dory":
        return kinds, source
    if engine == "vllm":
        raise ValueError("vLLM's cache of dory's looped layers is not modelled; use "
                         "engine='transformers'")
    # DoryModel.forward (5.24.0, models/dory/modeling_dory.py): with
    # recurrent_kv_cache_mode "per_loop" (the default) each further pass of the
    # recurrent section writes a copy of its layers' caches, appended after
    # the model's layers; with "last_loop" only the last pass writes
    mode = text.get("recurrent_kv_cache_mode") or "per_loop"
    if mode not in ("per_loop", "last_loop"):
        raise ValueError(f"recurrent_kv_cache_mode must be 'per_loop' or 'last_loop', "
                         f"got {mode!r}")
    if mode == "last_loop":
        return kinds, source + "; one cache layer per layer (last_loop)"
    first, middle = text["n_input_layers"], text["n_recurrent_layers"]
    if middle < 0:
        # DoryConfig checks only the sum: with more input and output layers than
        # layers, the sections overlap and the model runs some layers twice
        raise ValueError(f"n_recurrent_layers is {middle}: dory's n_input_layers "
                         f"({first}) and n_output_layers ({text['n_output_layers']}) "
                         f"exceed num_hidden_layers ({len(kinds)}), so its model runs "
                         f"some layers twice; its cache is not modelled")
    copies = kinds[first:first + middle] * (text["n_recurrent_loops"] - 1)
    return (kinds + copies, source + f"; the recurrent layers' caches once more for "
            f"each of {text['n_recurrent_loops'] - 1} further passes (per_loop)")


def _layer_cache_kinds(config: Mapping, engine: str) -> tuple[
        list[tuple[str, int | None]], str]:
    """:func:`_cache_kinds` for the model's own layers."""
    text, model_type = config_reader._text_config(config)
    model_type = (model_type or "").removesuffix("_text")
    layout = _layout(config, engine)
    if model_type in INKLING:
        if engine == "vllm":
            raise ValueError(f"vLLM's cache of {model_type}'s hybrid layers (keys, "
                             f"values and convolution states) is not modelled; use "
                             f"engine='transformers'")
        return ([(x.attention, x.window) for x in layout],
                "layer_types, as the Inkling config class fills them in")
    if engine == "vllm":
        return ([(x.attention, x.window) for x in layout],
                "the model's layer layout (posenc_lib.per_layer)")
    if model_type in config_reader.ATTENTION_FREE:  # their caches hold no keys or values
        return ([(x.attention, None) for x in layout],
                "the model has no attention layers")
    if model_type in ("mllama", "mllama_text_model"):
        # MllamaTextConfig defines neither layer_types nor a window, yet keeps
        # either key as an attribute, and its model's DynamicCache(config) reads
        # them as on any such class (4.57.6 and 5.24.0); the cross-attention
        # layers hold nothing per text token, whatever their cache layer is
        kinds, source = _dynamic_cache_kinds(text, model_type, layout)
        return ([("cross_attention", None) if x.attention == "cross_attention"
                 else kind for x, kind in zip(layout, kinds)],
                source + "; the cross-attention layers hold the image's keys only")
    if model_type not in HYBRID_CACHES and any(x.attention in NO_KV for x in layout):
        # a hybrid the tables do not name (5.x: Qwen3.5, OLMo hybrid): its layers
        # without attention hold no keys or values, whatever the cache class
        return ([(x.attention, x.window if x.attention in ("sliding_attention",
                                                            "chunked_attention")
                  else None) for x in layout],
                "layer_types: the layers without attention hold no keys or values")
    if model_type in HYBRID_CACHES:
        return ([(x.attention, None) for x in layout],
                f"the layer types, as {HYBRID_CACHES[model_type]} reads them")
    if model_type in LAYER_TYPED or model_type in LAYER_TYPED_5:
        # DynamicCache(config): one window for every sliding or chunked layer,
        # config.sliding_window or else config.attention_chunk_size
        windows = [x.window for x in layout if x.attention == "sliding_attention"]
        if not windows and any(x.attention == "chunked_attention" for x in layout) \
                and config_reader._reading_major(config_reader._RELEASE.get()) < 5:
            # 4.57.6's DynamicCache: config.sliding_window (a key Llama 4's class
            # keeps as given) or else attention_chunk_size, for every such layer
            windows = [text.get("sliding_window")] if text.get("sliding_window") else []
        windows += [x.window for x in layout if x.attention == "chunked_attention"]
        window = windows[0] if windows else None
        return ([(x.attention, window if x.attention in ("sliding_attention",
                                                          "chunked_attention")
                  else None) for x in layout],
                "layer_types, as the config class fills them in")
    if model_type in TUPLE_CACHE:
        return ([("full_attention", None)] * len(layout),
                "the model keeps its own (keys, values) per layer, no DynamicCache: "
                "nothing slides")
    return _dynamic_cache_kinds(text, model_type, layout)


def _dynamic_cache_kinds(text: Mapping, model_type: str, layout: list) -> tuple[
        list[tuple[str, int | None]], str]:
    """The cache layers ``DynamicCache(config)`` builds for a config class
    that does not define ``layer_types`` (``layout``: the model's layers)."""
    window = text.get("sliding_window")
    if model_type in ("qwen2_moe", "qwen3_moe") and not text.get("use_sliding_window"):
        window = None  # Qwen2MoeConfig and Qwen3MoeConfig keep it only with the switch
    elif model_type == "qwen3_moe" and "sliding_window" not in text:
        window = next((x.window for x in layout if x.window), None)  # the class's 4096
    if window is None:
        window = text.get("attention_chunk_size")
    raw_types = text.get("layer_types")
    if (window is not None and isinstance(raw_types, (list, tuple))
            and len(raw_types) == len(layout)):
        # a class that does not define layer_types still keeps the key as an
        # attribute, and DynamicCache builds its layers from it: a sliding cache
        # for "sliding_attention"/"chunked_attention", a full one for any other
        # (4.57.6 cache_utils.py DynamicCache.__init__ lines 962-982; 5.24.0
        # get_layer_types_and_kwargs), whatever the attention does
        return ([(t, window) if t in ("sliding_attention", "chunked_attention")
                 else ("full_attention", None) for t in raw_types],
                "layer_types in the config: DynamicCache follows the key even on "
                "a class that does not define it")
    if window is None:
        return [("full_attention", None)] * len(layout), "no sliding window"
    return ([("sliding_attention", window)] * len(layout),
            "sliding_window on a config class without layer_types: DynamicCache "
            "makes every layer a sliding one")


def _vllm_tokens(kind: str, window: int | None, length: int, block: int,
                 scheduled: int) -> int:
    """Tokens' worth of blocks vLLM reserves for one request of ``length``
    tokens (``max_memory_usage_bytes`` with ``max_model_len = length`` and
    ``max_num_batched_tokens = scheduled``; transcribed, see VLLM_SOURCE)."""
    def cdiv(a, b):
        return -(-a // b)
    if kind == "sliding_attention" and window:
        return (cdiv(min(window - 1 + scheduled, length), block) + 1) * block
    if kind == "chunked_attention" and window:
        return cdiv(min(window + scheduled, length), block) * block
    return cdiv(length, block) * block


def kv_cache_bytes(config: Mapping, *, bytes_per_value: int = 2,
                   length: int | None = None, engine: str = "transformers",
                   block_size: int = VLLM_BLOCK_SIZE,
                   scheduled_tokens: int = 1,
                   transformers_version: str | None = None) -> dict | None:
    """KV-cache size of one sequence, layer by layer from the model's layout
    (:func:`posenc_lib.per_layer.layer_layout`).

    Per token, a layer holding keys and values caches ``kv_heads x (key_dim +
    value_dim) x bytes`` (:func:`cache_head`; ``2 x kv_heads x head_dim x
    bytes`` for ordinary attention). Layers without them (linear attention,
    convolutions, Mamba) hold a fixed state instead (:func:`fixed_state_bytes`,
    reported apart).

    ``engine="transformers"`` (4.57.6's ``DynamicCache`` and the hybrid caches):
    a sliding or chunked layer keeps at most ``window - 1`` tokens between
    steps (``DynamicSlidingWindowLayer``; the window is ``sliding_window``,
    else Llama 4's ``attention_chunk_size``); a config class without
    ``layer_types`` gets a sliding cache on every layer when its config sets a
    ``sliding_window``.

    Which transformers: ``transformers_version`` (default: the installed one;
    any 4.x is modelled as 4.57.6, any 5.x as 5.24.0, and the result says
    which in ``transformers_version``). They differ for MLA: 4.57.6's
    ``DeepseekV3Attention`` caches the decompressed keys and values (per head
    ``qk_nope_head_dim + qk_rope_head_dim`` and ``v_head_dim``), 5.24.0's
    caches the latent before decompressing it, one ``kv_lora_rank`` vector and
    one ``qk_rope_head_dim`` vector per token and layer, as a single head
    (``models/deepseek_v3/modeling_deepseek_v3.py`` lines 445-460,
    ``models/deepseek_v2/modeling_deepseek_v2.py`` lines 386-396); and for the
    fixed state of LFM2 (:func:`fixed_state_bytes`).

    ``engine="vllm"``: the layers, their windows and heads are vLLM 0.33.0's
    (``_vllm_layout``: its engine-wide window, the classes that give each
    layer its own, MLA, Cohere 2's extra token, as a run of its model classes
    on every causal-LM architecture it serves measured them,
    ``tests/test_vllm_layers.py``); the block arithmetic is a transcription,
    see :data:`VLLM_SOURCE`, checked on the same run. MLA caches the latent, one ``kv_lora_rank + qk_rope_head_dim`` vector per
    token and layer; memory comes in blocks of ``block_size`` tokens; at
    ``length`` tokens a request reserves what vLLM's
    ``max_memory_usage_bytes`` gives with ``max_model_len = length`` and
    ``max_num_batched_tokens = scheduled_tokens`` (1 while decoding): full
    layers ``ceil(length / block)`` blocks, sliding ones
    ``ceil(min(window - 1 + scheduled, length) / block) + 1``, chunked ones
    ``ceil(min(chunk + scheduled, length) / block)``. This is vLLM's hybrid KV
    cache manager (its default); with it disabled, vLLM allocates sliding
    layers like full ones (``FullAttentionSpec``'s docstring). Not modelled:
    the page padding of the hybrid allocator. The fixed state of layers
    without attention follows the engine too (:func:`fixed_state_bytes`).

    Args:
        config: a parsed ``config.json``.
        bytes_per_value: 2 for bfloat16 or float16, 4 for float32, 1 for 8-bit.
        length: if given, the cache size in bytes at that many tokens.
        engine: ``"transformers"`` or ``"vllm"``.
        block_size: vLLM's tokens per block (``engine="vllm"`` only).
        scheduled_tokens: vLLM's tokens scheduled in one step (``"vllm"`` only).
        transformers_version: the transformers release whose caches to model
            (``engine="transformers"``; default: the installed one).

    Returns:
        dict with ``engine``, ``bytes_per_token`` (the growth per token, every
        layer with keys and values, before any window caps it),
        ``bytes_per_value``, ``num_key_value_heads``, ``key_dim``,
        ``value_dim``, ``layers``, ``kv_layers``, ``formula`` (the per-token
        figure in words), ``by_layer_type`` (per type: ``layers``,
        ``bytes_per_token``, ``window``, ``cap``: the tokens a transformers
        cache keeps at most, ``kv``: whether it holds keys and values, and
        ``preallocated``: true where transformers allocates all ``cap`` tokens
        at the first one, RecurrentGemma's attention layers in 4.57.6),
        ``layer_types_from``, ``fixed_state``, ``transformers_version`` (the
        release modelled; ``None`` for vLLM), ``indexer`` (transformers 5.x's
        sparse-attention indexer keys, included in ``bytes_per_token``:
        ``layers``, ``index_head_dim``, ``bytes_per_token``; ``None`` for other
        models, and for vLLM, whose indexer cache is not modelled) and, with
        ``length``, ``length``
        and ``bytes_at_length`` (plus ``tokens_at_length`` per type); ``None``
        when the config states neither ``num_hidden_layers`` nor
        ``layer_types``.

    Raises:
        ValueError: for an unknown ``engine`` (naming the known ones) or a bad
            size.
    """
    transformers_version = _release(config, transformers_version)
    with config_reader.reading_release(transformers_version):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        bytes_per_value = _validate.positive_int("bytes_per_value", bytes_per_value)
        block_size = _validate.positive_int("block_size", block_size)
        scheduled_tokens = _validate.positive_int("scheduled_tokens", scheduled_tokens)
        modelled = (mimicked_transformers_version(transformers_version)
                    if engine == "transformers" else None)
        text, _ = config_reader._text_config(config)
        if config_reader.num_layers(text) is None and text.get("layer_types") is None:
            return None
        kinds, source = _cache_kinds(config, engine)
        shared = text.get("num_kv_shared_layers") or 0
        if shared:  # Gemma 3n: the last layers read an earlier layer's cache
            shared = _validate.positive_int("num_kv_shared_layers", shared)
            kinds = kinds[:len(kinds) - shared] + [("shared_kv", None)] * min(
                shared, len(kinds))
        if all(kind in NO_KV for kind, _ in kinds):  # attention-free: no heads to read
            head = {"kv_heads": 0, "key_dim": 0, "value_dim": 0}
        else:
            head = cache_head(config)
        mla = head.get("mla")
        if engine == "vllm":
            head, mla = _vllm_head(text, config_reader._text_config(config)[1] or "",
                                   head, mla)
        latent = False  # whether the cache holds MLA's latent (not its keys)
        if mla is not None and (engine == "vllm" or modelled.startswith("5.")):
            latent = True
            kv_heads, per_layer = 1, (mla["kv_lora_rank"] + mla["qk_rope_head_dim"])
            formula = (f"{{layers}} layers x (kv_lora_rank {mla['kv_lora_rank']} + "
                       f"qk_rope_head_dim {mla['qk_rope_head_dim']}) x {bytes_per_value} "
                       f"bytes ({'vLLM' if engine == 'vllm' else 'transformers 5.x'} "
                       f"caches MLA's latent)")
        else:
            kv_heads = head["kv_heads"]
            per_layer = kv_heads * (head["key_dim"] + head["value_dim"])
            if mla is not None:
                formula = (f"{{layers}} layers x {kv_heads} KV heads x (key "
                           f"{mla['qk_nope_head_dim']} + {mla['qk_rope_head_dim']} + value "
                           f"{mla['v_head_dim']}) x {bytes_per_value} bytes (transformers "
                           f"4.x caches MLA decompressed)")
            else:
                formula = (f"2 x {{layers}} layers x {kv_heads} KV heads x head_dim "
                           f"{head['key_dim']} x {bytes_per_value} bytes")
                if head["value_dim"] != head["key_dim"]:
                    formula = (f"{{layers}} layers x {kv_heads} KV heads x (key "
                               f"{head['key_dim']} + value {head['value_dim']}) x "
                               f"{bytes_per_value} bytes")
        per_layer *= bytes_per_value
        own = _layer_heads(config, len(kinds)) if mla is None else {}
        raw = config_reader._raw_text_config(config)[1]
        raw_type = (raw or "").removesuffix("_text")
        if latent:
            # a layer with MLA sizes of its own (Dots 3 Note's sliding layers,
            # per_layer_config): its own latent
            for index, fields in config_reader.layer_overrides(text, raw).items():
                if not 0 <= index < len(kinds):
                    raise ValueError(f"per_layer_config names layer {index}, but the "
                                     f"model has {len(kinds)} layers")
                rank, rot = (_validate.positive_int(k, fields.get(k, mla[k])) for k in
                             ("kv_lora_rank", "qk_rope_head_dim"))
                if (rank, rot) != (mla["kv_lora_rank"], mla["qk_rope_head_dim"]):
                    own[index] = {"kv_heads": 1, "key_dim": rank, "value_dim": rot}
        if own:  # (an MLA layer's own latent: kv_lora_rank + qk_rope_head_dim)
            formula += "; " + ", ".join(
                (f"layer {i}: kv_lora_rank {h['key_dim']} + qk_rope_head_dim "
                 f"{h['value_dim']}" if latent else
                 f"layer {i}: {h['kv_heads']} KV heads x (key {h['key_dim']} + value "
                 f"{h['value_dim']})") for i, h in sorted(own.items())[:3]) + (
                f" and {len(own) - 3} more layers of their own (per_layer_config)"
                if len(own) > 3 else " (per_layer_config)")
        if raw_type in INKLING:  # the sliding layers' own heads
            sliding = _inkling_sliding_head(text, raw_type)
            own = {i: sliding for i, (kind, _) in enumerate(kinds)
                   if kind == "hybrid_sliding"}
            counts = [kind for kind, _ in kinds]
            formula = (f"2 x {counts.count('hybrid')} hybrid layers x {kv_heads} KV "
                       f"heads x head_dim {head['key_dim']} x {bytes_per_value} bytes "
                       f"+ 2 x {counts.count('hybrid_sliding')} hybrid_sliding layers x "
                       f"{sliding['kv_heads']} KV heads (swa_num_key_value_heads) x "
                       f"swa_head_dim {sliding['key_dim']} x {bytes_per_value} bytes")
        multiple = KV_HEADS_MULTIPLE.get(raw_type, {})
        if multiple:
            formula += "; " + ", ".join(f"{kind} layers keep {m} x the KV heads"
                                        for kind, m in multiple.items())
        # RecurrentGemma in 4.57.6 allocates its attention layers' keys and values
        # for attention_window_size tokens at the first token (_setup_cache of
        # RecurrentGemmaSdpaAttention), then overwrites them in a ring; 5.x keeps
        # them in a DynamicCache's sliding layers (window - 1 tokens)
        preallocated = (engine == "transformers" and modelled.startswith("4.") and
                        (config_reader._raw_text_config(config)[1] or "") ==
                        "recurrent_gemma")
        by_type: dict = {}
        for index, (kind, window) in enumerate(kinds):
            kv = kind not in NO_KV
            info = by_type.setdefault(kind, {"layers": 0, "bytes_per_token": 0,
                                             "window": window if kv else None,
                                             "cap": None, "kv": kv})
            info["layers"] += 1
            if kv:
                this = per_layer
                if index in own:
                    h = own[index]
                    this = h["kv_heads"] * (h["key_dim"] + h["value_dim"]) * bytes_per_value
                info["bytes_per_token"] += this * multiple.get(kind, 1)
                if window and engine == "transformers":
                    info["cap"] = window if preallocated else window - 1
                if preallocated:
                    info["preallocated"] = True
        v4 = engine == "transformers" and (config_reader._raw_text_config(config)[1]
                                           == "deepseek_v4")
        if v4:  # compressed layers: not a size per token (_deepseek_v4_cache)
            kinds = [(x.attention, None) for x in _layout(config)]
            by_type, v4_bytes = _deepseek_v4_cache(text, kinds, bytes_per_value)
            kv_heads, modelled = 1, mimicked_transformers_version("5")
            formula = ("per layer, a window of keys (sliding layers: keys and values) "
                       "plus one compressed entry per rate tokens and the open block "
                       "(DeepSeek-V4, transformers 5.x; bytes_per_token is the growth "
                       "averaged over a block)")
        kv_layers = sum(info["layers"] for info in by_type.values() if info["kv"])
        indexer = (_indexer(config, [(x.attention, None) for x in _layout(config)])
                   if engine == "transformers" and not v4
                   and modelled.startswith("5.") else None)
        indexer_per_token = 0
        if indexer is not None:
            width = 4 if indexer["float32"] else bytes_per_value
            indexer_per_token = indexer["layers"] * indexer["index_head_dim"] * width
            indexer["bytes_per_token"] = indexer_per_token
            formula += (f" + {indexer['layers']} layers x index_head_dim "
                        f"{indexer['index_head_dim']} x {width} bytes (the "
                        f"sparse-attention indexer's keys, transformers 5.x"
                        + (", in float32" if indexer["float32"] else "") + ")")
        out = {"engine": engine,
               "bytes_per_token": sum(info["bytes_per_token"] for info in by_type.values())
               + indexer_per_token,
               "bytes_per_value": bytes_per_value, "num_key_value_heads": int(kv_heads),
               "key_dim": head["key_dim"], "value_dim": head["value_dim"],
               "layers": len(kinds), "kv_layers": kv_layers,
               "formula": formula.format(layers=kv_layers), "by_layer_type": by_type,
               "layer_types_from": source,
               "fixed_state": fixed_state_bytes(config, bytes_per_value=bytes_per_value,
                                                engine=engine,
                                                transformers_version=modelled),
               "transformers_version": modelled, "indexer": indexer}
        if engine == "vllm":
            out.update(block_size=block_size, scheduled_tokens=scheduled_tokens,
                       source=VLLM_SOURCE)
        if length is not None:
            length = _validate.length("length", length)
            out["length"] = length
            total = 0
            for kind, info in by_type.items():
                if not info["kv"]:
                    info["tokens_at_length"] = 0
                    continue
                if v4:  # DeepSeek-V4: its own function of the length
                    total += v4_bytes(kind, length)
                    info["tokens_at_length"] = min(length, info["window"] - 1) \
                        if info["window"] > 1 else length
                    continue
                if engine == "vllm":
                    tokens = _vllm_tokens(kind, info["window"], length, block_size,
                                          scheduled_tokens)
                else:
                    tokens = min(length, info["cap"]) if info["cap"] else length
                    if info.get("preallocated"):
                        tokens = info["cap"]  # the whole buffer from the first token
                info["tokens_at_length"] = tokens
                total += info["bytes_per_token"] * tokens
            out["bytes_at_length"] = total + indexer_per_token * length
        return out
