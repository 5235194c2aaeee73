"""Which positions each layer of a model uses, read from its ``config.json``.

Many current models are not one RoPE. Their config classes in transformers
4.57.6 give every layer a type (``layer_types``; older configs give a pattern
the class expands), and their modelling code builds the rotary embedding per
type:

* **Gemma 3** (``Gemma3TextModel``): sliding-window layers use a second
  rotary module with ``rope_local_base_freq`` and no scaling; full-attention
  layers use ``rope_theta`` and the config's ``rope_scaling``.
* **OLMo 3** (``Olmo3Model.rotary_embs``): sliding layers plain RoPE,
  full-attention layers the config's method (YaRN in the long-context model).
* **Llama 4** and **SmolLM3**: ``no_rope_layers[i] == 0`` marks a layer that
  applies no RoPE at all (NoPE); Llama 4 scales the queries of those layers
  by a log temperature (``attn_temperature_tuning``, ``attn_scale``,
  ``floor_scale``).
* **Qwen3-Next**: ``linear_attention`` layers (gated DeltaNet) have no
  positions of their own; only ``full_attention`` layers rotate.
* **Cohere 2** (``Cohere2Attention``) and **EXAONE 4** (``Exaone4Attention``):
  only sliding-window layers rotate; their full-attention layers apply no
  RoPE (NoPE). Cohere 2 rotates only where a window is set; EXAONE 4 rotates
  every layer when ``sliding_window`` is null.
* **Granite 4.0** (``granitemoehybrid``): ``mamba`` layers have no positions;
  its ``attention`` layers rotate only if ``position_embedding_type`` is
  ``"rope"`` (otherwise the model has no positional encoding at all).
* **LFM2** (``Lfm2Config``): the layers not listed in ``full_attn_idxs`` are
  ``conv`` layers, short gated convolutions without positions; the attention
  layers rotate.

* **transformers 5.x's newer classes**: AFMoE and LaRA-mini rotate only
  their sliding layers; Cohere2-MoE and Flint as Cohere 2 (Cohere2-MoE's
  dense-MLP layers also rotate when ``prefix_dense_sliding_window_pattern``
  is 1); EXAONE-MoE and Kolibri as EXAONE 4; a per-layer-type
  ``rope_parameters`` entry of ``None`` (Beam) means no RoPE for that type.
  A config without ``layer_types`` is expanded as each class expands it
  (``_PATTERNS``; checked over generated configs of every such class).

Every other layer uses the model's one RoPE, and a sliding-window layer sees
no distance of ``sliding_window`` or more (Gemma 2/3, Cohere 2, EXAONE 4,
OLMo 3, gpt-oss, Qwen2/Qwen3 with ``use_sliding_window``; every layer of
Mistral and the other classes of ``SLIDES_EVERY_LAYER``).

A ``layer_types`` key is read only where the config class defines the field:
elsewhere (``LlamaConfig``, say) the class keeps it as an attribute that its
model's masks never read, though its ``DynamicCache`` does (the library
warns, with an ``IgnoredKeyWarning``). What each layer attends to was measured on
every causal-LM type, for the prompt and a decoded token
(``scripts/attention_spans.py``, ``tests/test_attention_spans.py``).
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass
from typing import Mapping

from . import config_reader, _validate
from . import _defaults

__all__ = ["LayerRope", "LAYER_DEFAULTS", "layer_types", "layer_layout",
           "layer_config", "llama4_no_rope_layers"]

#: The config class defaults (transformers 4.57.6, ``__init__`` signatures) of
#: the fields that decide the layer layout; ``tests/test_per_layer.py`` checks
#: each. Held in ``posenc_lib._defaults`` (the base layer, where the validator
#: reads it too) and the same object here.
LAYER_DEFAULTS = _defaults.LAYER_DEFAULTS
#: Model types whose classes expand a period into sliding/full layers:
#: layer i is full attention when (i + 1) % period == 0.
_PERIODIC = {"gemma2": 2, "gemma3": "sliding_window_pattern",
             "cohere2": "sliding_window_pattern", "exaone4": "sliding_window_pattern",
             "exaone_moe": "sliding_window_pattern",
             "olmo3": 4, "gpt_oss": 2}


def _kind(full: bool, other: str = "sliding_attention") -> str:
    return "full_attention" if full else other


def _cohere2_moe_kinds(text: Mapping, n: int, get) -> list[str]:
    # Cohere2MoeConfig.__post_init__: the first first_k_dense_replace layers
    # (a keyword it pops, so a stored config keeps only the layer_types it
    # made) follow prefix_dense_sliding_window_pattern, the rest
    # sliding_window_pattern
    dense = min(_validate.nonnegative_int(
        "first_k_dense_replace", text.get("first_k_dense_replace", 0)), n)
    prefix = _validate.positive_int("prefix_dense_sliding_window_pattern",
                                    get("prefix_dense_sliding_window_pattern"))
    rest = _validate.positive_int("sliding_window_pattern", get("sliding_window_pattern"))
    return ([_kind((i + 1) % prefix == 0) for i in range(dense)]
            + [_kind((i + 1) % rest == 0) for i in range(n - dense)])


def _olmo_hybrid_kinds(text: Mapping, n: int, get) -> list[str]:
    kinds = [_kind(i % 4 == 3, "linear_attention") for i in range(n)]
    if "full_attention" not in kinds:  # OlmoHybridConfig: at least one
        kinds[-1] = "full_attention"
    return kinds


def _beam_kinds(text: Mapping, n: int, get) -> list[str]:
    kinds = [_kind((i + 1) % 6 == 0) for i in range(n)]
    kinds[-1] = "full_attention"  # BeamConfig: the last layer attends fully
    return kinds


_LARA_MINI = ("linear_attention", "sliding_attention", "linear_attention",
              "full_attention", "sliding_attention")


def _dots3_note_kinds(text: Mapping, n: int, get) -> list[str]:
    # Dots3NoteTextConfig.__post_init__ (models/dots3_note/configuration_dots3_note.py,
    # 5.24.0): use_dsa and use_sliding_window are keywords it pops; layers 0, 1 and
    # i % 4 == 1 attend fully, indexed unless use_dsa is given and false
    use_dsa = text.get("use_dsa")
    full = "full_attention" if use_dsa is not None and not use_dsa else "indexed_attention"
    sliding = text.get("use_sliding_window", True)
    return [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention"
            for i in range(n)]


def _kimi_linear_kinds(text: Mapping, n: int, get) -> list[str]:
    # KimiLinearConfig.__post_init__ (models/kimi_linear/configuration_kimi_linear.py,
    # 5.24.0): linear_attn_config's full_attn_layers and kda_layers (1-indexed),
    # when it has both; else layer i attends fully where i > 0 and i % 4 == 0
    linear = text.get("linear_attn_config", {})
    if not isinstance(linear, Mapping):
        raise ValueError(f"linear_attn_config must be a mapping, got {linear!r}")
    if "full_attn_layers" not in linear or "kda_layers" not in linear:
        return [_kind(i > 0 and i % 4 == 0, "linear_attention") for i in range(n)]
    kinds: list = [None] * n
    for name, kind in (("full_attn_layers", "full_attention"),
                       ("kda_layers", "linear_attention")):
        for layer in linear[name]:
            if isinstance(layer, bool) or not isinstance(layer, int) or \
                    not 1 <= layer <= n:
                raise ValueError(f"linear_attn_config's {name} holds layer numbers "
                                 f"from 1 to num_hidden_layers={n}, got {layer!r}")
            kinds[layer - 1] = kind
    if None in kinds:
        raise ValueError(f"linear_attn_config names no type for layer "
                         f"{kinds.index(None) + 1} (full_attn_layers and kda_layers "
                         f"count from 1)")
    return kinds


#: Zamba2Config's layers_block_type when none is given (4.57.6 __init__,
#: 5.24.0 __post_init__; 5.x writes "linear_attention" for "mamba").
_ZAMBA2_DEFAULT = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4
                   + ["hybrid"] + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2)


def _zamba_kinds(text: Mapping, n: int, get) -> list[str]:
    # ZambaConfig (models/zamba/configuration_zamba.py: 4.57.6 _layers_block_type,
    # 5.24.0 __post_init__, which names the Mamba layers linear_attention)
    period = _validate.positive_int("attn_layer_period", text.get("attn_layer_period", 6))
    offset = text.get("attn_layer_offset", 4)
    if n < 3:
        raise ValueError(f"ZambaConfig's layers_block_type has 3 entries for "
                         f"num_hidden_layers={n}: give at least 3 layers")
    return ["mamba", "mamba", "hybrid"] + [
        "hybrid" if i % period == offset else "mamba" for i in range(n - 3)]


#: The ``layer_types`` a config class fills in when ``config.json`` has none,
#: for the classes that expand a fixed rule or a field of their own (each
#: class's ``__init__``/``__post_init__``, transformers 4.57.6 and 5.24.0):
#: ``model_type`` (without ``_text``) -> ``f(text, n, get)``, where ``get(name)``
#: reads a field or the class default. ``tests/test_layer_patterns.py``
#: compares each with the class's own expansion over generated layer counts
#: and fields (live for 4.57.6, ``results/layer-patterns-5.json`` for 5.x).
_PATTERNS = {
    "gemma3n": lambda t, n, get: [_kind((i + 1) % 5 == 0) for i in range(n)],
    "kolibri1": lambda t, n, get: [_kind((i + 1) % 5 == 0) for i in range(n)],
    "vaultgemma": lambda t, n, get: [_kind((i + 1) % 2 == 0) for i in range(n)],
    "minimax": lambda t, n, get: [_kind((i + 1) % 2 == 1, "linear_attention")
                                  for i in range(n)],
    "ministral": lambda t, n, get: [_kind(get("sliding_window") is None)] * n,
    "modernbert-decoder": lambda t, n, get: [
        _kind(i % _validate.positive_int(
            "global_attn_every_n_layers", get("global_attn_every_n_layers")) == 0)
        for i in range(n)],
    "afmoe": lambda t, n, get: [
        _kind((i + 1) % _validate.positive_int(
            "global_attn_every_n_layers", get("global_attn_every_n_layers")) == 0)
        for i in range(n)],
    "bailing_hybrid": lambda t, n, get: [
        _kind((i + 1) % _validate.positive_int(
            "layer_group_size", get("layer_group_size")) == 0, "linear_attention")
        for i in range(n)],
    "qwen3_5": lambda t, n, get: [
        _kind((i + 1) % _validate.positive_int(
            "full_attention_interval", t.get("full_attention_interval", 4)) == 0,
            "linear_attention") for i in range(n)],
    "cwm": lambda t, n, get: [_kind(i % 4 == 0) for i in range(n)],
    "granite_swa": lambda t, n, get: [_kind(i % 4 == 0) for i in range(n)],
    "flint": lambda t, n, get: [_kind(i < 2 or i % 4 == 1 or i == n - 1)
                                for i in range(n)],
    "mimo_v2_flash": lambda t, n, get: [_kind(i == 0 or (i + 1) % 6 == 0)
                                        for i in range(n)],
    "lfm3": lambda t, n, get: [
        "full_attention" if i % 4 == 2 else
        "sliding_attention" if i % 4 == 0 and i > 0 else "conv" for i in range(n)],
    "lara_mini": lambda t, n, get: [_LARA_MINI[i % 5] for i in range(n)],
    "axk2": lambda t, n, get: ["indexed_attention"] * n,
    "glm_moe_dsa": lambda t, n, get: ["indexed_attention"] * n,
    "hy_v4": lambda t, n, get: ["indexed_attention"] * n,
    "zaya": lambda t, n, get: ["hybrid"] * n,
    # Dots1Config: layer i slides where a window is set and i >= max_window_layers
    # (no use_sliding_window switch, unlike Qwen2)
    "dots1": lambda t, n, get: [
        _kind(get("sliding_window") is None or i < _validate.nonnegative_int(
            "max_window_layers", get("max_window_layers"))) for i in range(n)],
    "cohere2_moe": _cohere2_moe_kinds,
    "olmo_hybrid": _olmo_hybrid_kinds,
    "beam": _beam_kinds,
    # DoryConfig.__post_init__ (dory/configuration_dory.py, 5.24.0); without
    # layer_types it halves nothing: num_hidden_layers counts the layers
    "dory": lambda t, n, get: [_kind((i + 1) % 4 == 0) for i in range(n)],
    "dots3_note": _dots3_note_kinds,
    # FalconH1Config.layers_block_type (falcon_h1/configuration_falcon_h1.py,
    # 5.24.0): every layer attention and Mamba side by side
    "falcon_h1": lambda t, n, get: ["hybrid"] * n,
    # GraniteMoeHybridConfig (granitemoehybrid/configuration_granitemoehybrid.py):
    # every layer Mamba, "mamba" in 4.57.6's layers_block_type, linear_attention in
    # 5.24.0's __post_init__
    "granitemoehybrid": lambda t, n, get: ["mamba"] * n,
    "kimi_linear": _kimi_linear_kinds,
    # Qwen4ExpTextConfig.__post_init__ (qwen4_exp/configuration_qwen4_exp.py,
    # 5.24.0): full_attention_interval, a keyword it pops (default 4)
    "qwen4_exp": lambda t, n, get: [
        "indexed_attention" if (i + 1) % _validate.positive_int(
            "full_attention_interval", t.get("full_attention_interval", 4)) == 0
        else "linear_attention" for i in range(n)],
    "zamba": _zamba_kinds,
    # RecurrentGemmaConfig.layers_block_type (recurrent_gemma/
    # configuration_recurrent_gemma.py, 4.57.6 and 5.24.0): block_types repeated
    # over the layers; its attention blocks attend within attention_window_size
    "recurrent_gemma": lambda t, n, get: [
        "linear_attention" if kind == "recurrent" else "sliding_attention"
        for kind in (list(t.get("block_types") or
                          ("recurrent", "recurrent", "attention")) * n)[:n]],
}
# DeepseekV4Config.__post_init__ (5.24.0): two heavily compressed layers, then
# compressed-sparse and heavily compressed ones in turn (no sliding layer)
_PATTERNS["deepseek_v4"] = lambda t, n, get: (
    ["heavily_compressed_attention"] * min(n, 2)
    + ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
       for i in range(max(n - 2, 0))])
_PATTERNS["gemma4"] = lambda t, n, get: config_reader.gemma4_layer_types(n)
_PATTERNS["gemma4_unified"] = _PATTERNS["gemma4"]
_PATTERNS["qwen3_5_moe"] = _PATTERNS["qwen3_5"]
_PATTERNS["granitemoe_swa"] = _PATTERNS["granite_swa"]
#: ``MllamaTextConfig``'s default ``cross_attention_layers``.
_MLLAMA_CROSS = (3, 8, 13, 18, 23, 28, 33, 38)
#: Config classes whose models take their layers from another field and never
#: read a ``layer_types`` key, which 4.57.6 keeps as an attribute: the field,
#: what 5.24.0 does with the key, and whether 5.x ignores it too (BambaConfig
#: and RecurrentGemmaConfig map it onto a read-only property and refuse the
#: config; 5.x's Zamba2Config attribute_map makes it layers_block_type).
#: ``tests/test_window_keys.py`` judges the caches of such configs.
LAYER_TYPES_UNREAD = {
    "bamba": ("attn_layer_indices", "5.x refuses the key", True),
    "recurrent_gemma": ("block_types", "5.x refuses the key", True),
    "zamba2": ("layers_block_type", "5.x reads the key as that field", False)}
#: Config classes without layer types whose model gives every attention layer
#: one mask, a sliding one when ``config.sliding_window`` is set (``mask_function
#: = create_causal_mask if self.config.sliding_window is None else
#: create_sliding_window_causal_mask``, e.g. 4.57.6
#: ``models/phi3/modeling_phi3.py``), by release; measured on every causal-LM
#: type by ``scripts/attention_spans.py`` (``tests/test_attention_spans.py``).
#: Qwen2-MoE's 4.57.6 class (window behind ``use_sliding_window``) is read with
#: Qwen3-MoE's; its 5.x class defines layer types.
SLIDES_EVERY_LAYER = {
    4: frozenset({"doge", "mistral", "mixtral", "phi3", "phi4_multimodal", "phimoe",
                  "starcoder2"}),
    5: frozenset({"doge", "ministral3", "mistral", "mixtral", "phi3",
                  "phi4_multimodal", "phimoe", "starcoder2"})}


#: Classes that define layer types but whose model builds only the causal mask
#: (5.24.0 ``models/minimax_m3_vl/modeling_minimax_m3_vl.py`` imports
#: ``create_causal_mask`` alone): a ``"sliding_attention"`` entry attends to every
#: earlier token. Measured by ``scripts/attention_spans.py``.
NEVER_SLIDES = {5: frozenset({"minimax_m3_vl"})}


def _minimax_kinds(kinds: list) -> list:
    """MiniMaxModel (4.57.6 and 5.24.0) masks a ``"full_attention"`` layer (with
    the sliding mask when ``sliding_window`` is set: that layer's window, see
    ``_layout``), and passes any other attention layer no mask at all (SDPA
    then attends causally)."""
    other = sorted({k for k in kinds if k not in ("full_attention", "linear_attention")})
    if other:
        warnings.warn(f"layer_types {other} in a minimax config: MiniMaxModel passes "
                      f"such a layer no attention mask (only 'full_attention' layers "
                      f"get one), and under SDPA (the default) such a layer attends to "
                      f"every earlier token; read as full_attention",
                      config_reader.IgnoredKeyWarning, stacklevel=5)
    return ["linear_attention" if k == "linear_attention" else "full_attention"
            for k in kinds]


@functools.cache
def _key_only_types() -> dict[int, frozenset]:
    """``{major: model types}`` whose config class does not define
    ``layer_types`` (``data/layer_types_fields.json``, measured over every type
    4.57.6 and 5.24.0 register by ``scripts/attention_spans.py``)."""
    from importlib import resources

    raw = json.loads(resources.files("posenc_lib").joinpath(
        "data", "layer_types_fields.json").read_text("utf-8"))
    return {int(release.split(".")[0]): frozenset(entry["keeps_unread"])
            for release, entry in raw["releases"].items()}


def _ignored_layer_types(model_type: str | None, major: int) -> None:
    """Warn that a ``layer_types`` key is kept by a config class that does not
    define it, so the model's attention ignores it (its cache may not)."""
    release = {4: "4.57.6", 5: "5.24.0"}[major]
    warnings.warn(
        f"layer_types ignored for the attention: the {model_type} config class of "
        f"transformers {release} does not define it, so the model's masks never "
        f"read it, and every layer attends as the class alone says. transformers' "
        f"DynamicCache(config) reads the key all the same: where it makes a "
        f"layer's cache slide, a generated token attends only to what that cache "
        f"keeps (the KV-cache sizes follow the cache, layer by layer), while each "
        f"prompt token attended as the class says; drop the key, or use a model "
        f"type that defines layer types",
        config_reader.IgnoredKeyWarning, stacklevel=5)


#: Inkling's text models (5.24.0): "hybrid" layers attend over every token,
#: "hybrid_sliding" ones within ``sliding_window_size``; both convolve their
#: keys and values. Without ``layer_types`` a layer is full where ``(i + 1) %
#: 6 == 0`` (``Inkling2TextConfig``, ``Inkling2LoopTextConfig``), and
#: ``InklingTextConfig`` first reads ``local_layer_ids``, the sliding layers
#: (``models/inkling/configuration_inkling.py``, ``__post_init__``); the two
#: later classes accept that key and ignore it.
INKLING = ("inkling", "inkling2", "inkling2_loop")
for _name in INKLING:
    _PATTERNS[_name] = lambda t, n, get, _v1=_name == "inkling": [
        "hybrid_sliding" if (i in set(t["local_layer_ids"])
                             if _v1 and t.get("local_layer_ids") is not None
                             else (i + 1) % 6) else "hybrid" for i in range(n)]


def _deepseek_v4_ratios(ratios) -> list[str]:
    """DeepSeek-V4's legacy ``compress_ratios`` (0, 4 or 128 a layer) as its
    layer types (``DeepseekV4Config``, 5.24.0)."""
    if not isinstance(ratios, (list, tuple)) or not all(
            r in config_reader.DEEPSEEK_V4_RATIOS for r in ratios):
        raise ValueError(f"compress_ratios must be a list of "
                         f"{sorted(config_reader.DEEPSEEK_V4_RATIOS)}, got {ratios!r}")
    return [config_reader.DEEPSEEK_V4_RATIOS[r] for r in ratios]


def _per_type_none(text: Mapping, kind: str) -> bool:
    """Whether a 5.x per-layer-type ``rope_parameters`` maps ``kind`` to None
    (BeamModel: that layer type gets no position embeddings)."""
    nested = text.get("rope_parameters")
    return (config_reader.is_per_layer_type(nested) and kind in nested
            and nested[kind] is None)


#: Classes with a RoPE base per layer, ``layer_rope_theta`` (0: no RoPE), that
#: overrides the global one (GraniteSWAModel.rotary_embs, 5.24.0).
LAYER_THETA_TYPES = ("granite_swa", "granitemoe_swa")


def _layer_theta(text: Mapping, model_type: str | None, i: int, n: int):
    """Layer ``i``'s own RoPE base from ``layer_rope_theta``, or ``None``."""
    thetas = text.get("layer_rope_theta")
    if model_type not in LAYER_THETA_TYPES or thetas is None:
        return None
    if not isinstance(thetas, (list, tuple)) or len(thetas) != n:
        raise ValueError(f"layer_rope_theta must be a list of {n} bases (one per "
                         f"layer, 0 for no RoPE), got {thetas!r}")
    theta = thetas[i]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta < 0:
        raise ValueError(f"layer_rope_theta[{i}] must be a base >= 0, got {theta!r}")
    return theta


def _force_rope(text: Mapping, model_type: str, i: int, n: int, used: list) -> bool:
    """Cohere2MoeAttention.force_rope: a dense-MLP layer rotates whatever its
    attention type when ``prefix_dense_sliding_window_pattern`` is 1."""
    if model_type != "cohere2_moe" or \
            _field(text, model_type, "prefix_dense_sliding_window_pattern", used) != 1:
        return False
    mlp = text.get("mlp_layer_types")
    if mlp is None:  # Cohere2MoeConfig: dense below first_k_dense_replace
        return i < text.get("first_k_dense_replace", 0)
    if len(mlp) != n:
        raise ValueError(f"mlp_layer_types has {len(mlp)} entries for "
                         f"num_hidden_layers={n}")
    return mlp[i] == "dense"


def llama4_no_rope_layers(num_hidden_layers: int, no_rope_layer_interval: int = 4) -> list[int]:
    """Llama 4's default ``no_rope_layers``: 1 = RoPE layer, 0 = NoPE layer.

    Every ``no_rope_layer_interval``-th layer (the 4th, 8th, ...) is a NoPE
    layer. Mind the name: a *1* in ``no_rope_layers`` means the layer *uses*
    RoPE.
    """
    n = _validate.positive_int("num_hidden_layers", num_hidden_layers)
    interval = _validate.positive_int("no_rope_layer_interval", no_rope_layer_interval)
    return [int((layer + 1) % interval != 0) for layer in range(n)]


@dataclass(frozen=True)
class LayerRope:
    """One layer's positional set-up.

    Attributes:
        index: the layer's index.
        attention: its type (``"full_attention"``, ``"sliding_attention"``,
            ``"chunked_attention"``, ``"linear_attention"``, ``"conv"``).
        rope: which rotary embedding it applies: ``"global"`` (the model's
            RoPE), ``"local"`` (Gemma 3's ``rope_local_base_freq``, or OLMo 3's
            plain one) or ``None`` (no RoPE: NoPE, linear attention or a
            convolution).
        window: the largest distance the layer sees plus one (the sliding
            window, Llama 4's attention chunk), or ``None``.
        temperature: the query temperature of a NoPE layer: Llama 4's
            (``{"attn_scale": ..., "floor_scale": ...}``) or Beam's
            (``{"formula": ..., "source": ...}``), else ``None``.
    """

    index: int
    attention: str
    rope: str | None
    window: int | None = None
    temperature: dict | None = None


def _field(text: Mapping, model_type: str | None, name: str, used: list):
    if name in text and (text[name] is not None or name == "sliding_window"):
        return text[name]  # an explicit null window means no window
    defaults = LAYER_DEFAULTS.get(model_type, {})
    if name in defaults:
        used.append(name)
        return defaults[name]
    return None


def _no_rope_layers(text: Mapping, model_type: str, n: int, used: list) -> list:
    given = text.get("no_rope_layers")
    if model_type == "llama4" and given == []:  # Llama4TextConfig: [] means default
        given = None
    if given is None:
        interval = _validate.positive_int(
            "no_rope_layer_interval",
            _field(text, model_type, "no_rope_layer_interval", used))
        return llama4_no_rope_layers(n, interval)
    if len(given) != n:
        raise ValueError(f"no_rope_layers has {len(given)} entries for "
                         f"num_hidden_layers={n}")
    return list(given)


def _defaults_warning(used: list, model_type: str | None) -> None:
    config_reader.warn_defaults(used, LAYER_DEFAULTS.get(model_type, {}), model_type,
                          stacklevel=5)


def _layout(config: Mapping, *, key_layer_types: bool = False) -> tuple[
        list[LayerRope], dict, str | None, list]:
    text, model_type = config_reader._text_config(config)
    raw_type = model_type
    if isinstance(model_type, str):  # gemma3_text, llama4_text: the same classes
        model_type = model_type.removesuffix("_text")
    used: list = []
    if model_type == "nemotron_h":
        text = {**text, "layer_types": config_reader.nemotron_h_layer_types(text)}
        n = len(text["layer_types"])  # NemotronHConfig ignores num_hidden_layers
    else:
        n = config_reader.num_layers(text)  # n_layer, num_layers: the same field
    if n is None:
        n = _field(text, model_type, "num_hidden_layers", used)
    given = text.get("layer_types")
    unread = LAYER_TYPES_UNREAD.get(model_type)
    major = config_reader._reading_major(config_reader._RELEASE.get())
    if given is not None and unread is not None and (unread[2] or major < 5):
        field, five = unread[:2]
        warnings.warn(f"layer_types ignored: the {model_type} config class of "
                      f"transformers 4.57 keeps the key as an attribute its model "
                      f"never reads, taking its layers from {field} "
                      f"({text.get(field)!r}); {five}",
                      config_reader.IgnoredKeyWarning, stacklevel=4)
        given = None
    if given is not None and not key_layer_types and isinstance(raw_type, str) and \
            raw_type in _key_only_types().get(major, ()) and \
            model_type not in ("zamba2", "mllama", "mllama_text_model"):
        _ignored_layer_types(raw_type, major)
        given = None
    if model_type in ("mllama", "mllama_text_model"):
        # MllamaTextConfig defines no layer_types: its model takes the layers from
        # cross_attention_layers (a given key reaches only its DynamicCache,
        # which serving._layer_cache_kinds follows)
        given = None
    if model_type == "zamba2" and given is None:
        # Zamba2Config: layers_block_type ("mamba" in 4.57.6, "linear_attention"
        # in 5.24.0, or "hybrid"); 5.x's attribute_map names it layer_types and
        # to_dict() writes layers_block_type. Without one: the class's 54 layers
        given = text.get("layers_block_type") or _ZAMBA2_DEFAULT
    if n is None and given is not None:
        n = len(given)
    if n is None:
        nested = sorted(k for k, v in text.items() if isinstance(v, Mapping)
                        and isinstance(v.get("text_config"), Mapping))
        if nested:  # Qwen2.5-Omni, Qwen3-Omni: the thinker holds the language model
            raise ValueError(
                f"config keeps its language model in {nested[0]}['text_config'], "
                f"which this library does not look into: pass "
                f"config[{nested[0]!r}] (a config with a text_config) instead")
        raise ValueError("config is incomplete: the layer layout needs "
                         "num_hidden_layers (or layer_types)")
    n = _validate.positive_int("num_hidden_layers", n)
    no_rope = (_no_rope_layers(text, model_type, n, used)
               if model_type in ("llama4", "smollm3") else [1] * n)
    window = _field(text, model_type, "sliding_window", used)
    if model_type in INKLING:  # a null window fails in the model, whatever its layers
        # (the sliding mask it always builds, the cache's buffers; 5.24.0)
        if "sliding_window" not in text:  # (the alias wins where both are given)
            window = _field(text, model_type, "sliding_window_size", used)
        if window is None:
            raise ValueError(
                f"{model_type}: the sliding window is null (the config class takes "
                f"the alias sliding_window over sliding_window_size, a null one too), "
                f"and its model fails at the first forward pass (transformers "
                f"5.24.0); give the window as a positive integer, or drop the null key")
        _validate.positive_int("sliding_window" if "sliding_window" in text
                               else "sliding_window_size", window)
    if model_type == "recurrent_gemma":  # its attention blocks' local window
        window = _validate.positive_int("attention_window_size", _field(
            text, model_type, "attention_window_size", used))
    if model_type == "deepseek_v4" and given is None and \
            text.get("compress_ratios") is not None:
        given = _deepseek_v4_ratios(text["compress_ratios"])
    if model_type == "deepseek_v4" and given is not None and len(given) > n:
        # DeepseekV4Config.__post_init__ cuts layer_types to num_hidden_layers
        warnings.warn(f"layer_types has {len(given)} entries for num_hidden_layers="
                      f"{n}: DeepseekV4Config keeps the first {n}",
                      config_reader.IgnoredKeyWarning, stacklevel=4)
        given = list(given)[:n]
    if given is not None:
        if len(given) != n:
            raise ValueError(f"layer_types has {len(given)} entries for "
                             f"num_hidden_layers={n}")
        kinds = list(given)
    elif model_type in config_reader.ATTENTION_FREE:  # no attention at all
        kinds = [config_reader.ATTENTION_FREE[model_type]] * n
    elif model_type == "jamba":  # JambaConfig.layers_block_type
        period = _validate.positive_int("attn_layer_period",
                                        text.get("attn_layer_period", 8))
        offset = text.get("attn_layer_offset", 4)
        kinds = ["full_attention" if i % period == offset else "mamba"
                 for i in range(n)]
    elif model_type == "bamba":  # BambaConfig.layers_block_type
        attending = text.get("attn_layer_indices") or ()
        kinds = ["full_attention" if i in attending else "mamba" for i in range(n)]
    elif model_type in ("exaone4", "exaone_moe") and window is None:
        raise ValueError(f"an {model_type} config with sliding_window null needs "
                         "layer_types: its config class then takes the pattern as 0 "
                         "and cannot build the layers either")
    elif model_type in _PERIODIC:
        period = _PERIODIC[model_type]
        if isinstance(period, str):
            period = _validate.positive_int(period, _field(text, model_type, period,
                                                           used))
        kinds = ["sliding_attention" if (i + 1) % period else "full_attention"
                 for i in range(n)]
    elif model_type == "qwen3_next":
        period = _validate.positive_int(
            "full_attention_interval",
            _field(text, model_type, "full_attention_interval", used))
        kinds = ["linear_attention" if (i + 1) % period else "full_attention"
                 for i in range(n)]
    elif model_type == "llama4":
        kinds = ["chunked_attention" if r else "full_attention" for r in no_rope]
    elif model_type == "lfm2":  # None: every layer attends (Lfm2Config)
        attending = _field(text, model_type, "full_attn_idxs", used)
        attending = range(n) if attending is None else attending
        kinds = ["full_attention" if i in attending else "conv" for i in range(n)]
    elif model_type == "smollm3":
        sliding = (_field(text, model_type, "use_sliding_window", used)
                   and window is not None)
        kinds = ["sliding_attention" if sliding and not r else "full_attention"
                 for r in no_rope]
    elif model_type in ("qwen2", "qwen3") or (model_type == "qwen2_moe" and major >= 5):
        if not _field(text, model_type, "use_sliding_window", used):
            window = None  # Qwen2Config: sliding_window only with use_sliding_window
        first = _field(text, model_type, "max_window_layers", used)
        kinds = ["sliding_attention" if window is not None and i >= first
                 else "full_attention" for i in range(n)]
    elif model_type in ("qwen3_moe", "qwen2_moe"):
        # Qwen3MoeConfig (and 4.57.6's Qwen2MoeConfig) keeps sliding_window only
        # with use_sliding_window, and then every layer slides (the model's one
        # mask; max_window_layers is not read)
        if not _field(text, model_type, "use_sliding_window", used):
            window = None
        kinds = ["sliding_attention" if window is not None else "full_attention"] * n
    elif model_type in SLIDES_EVERY_LAYER[major]:
        if model_type == "phimoe" and major < 5 and not text.get("use_sliding_window",
                                                                  True):
            # 4.57.6's PhimoeModel builds its sliding mask only if
            # getattr(config, "use_sliding_window", True), a key its class lacks
            # (models/phimoe/modeling_phimoe.py line 1167); its cache still slides
            window = None
        kinds = ["sliding_attention" if window is not None else "full_attention"] * n
    elif model_type in _PATTERNS:
        kinds = list(_PATTERNS[model_type](
            text, n, lambda name: _field(text, model_type, name, used)))
    elif model_type in ("mllama", "mllama_text_model"):
        # MllamaTextModel: the layers cross_attention_layers names attend to the
        # image's states (MllamaCrossAttentionDecoderLayer: no RoPE, nothing
        # cached per text token); the class default, for its 40 layers, is
        # [3, 8, ..., 38] (MllamaTextConfig, 4.57.6 and 5.24.0)
        cross = text.get("cross_attention_layers")
        cross = set(_MLLAMA_CROSS if cross is None else cross)
        kinds = ["cross_attention" if i in cross else "full_attention" for i in range(n)]
    else:
        kinds = ["full_attention"] * n
    if model_type in NEVER_SLIDES.get(major, ()) and "sliding_attention" in kinds:
        warnings.warn(f"layer_types names sliding_attention layers, but the "
                      f"{model_type} model builds no sliding mask (only a causal "
                      f"one): they attend to every earlier token, and only its "
                      f"DynamicCache keeps the window",
                      config_reader.IgnoredKeyWarning, stacklevel=4)
        kinds = ["full_attention" if k == "sliding_attention" else k for k in kinds]
    if model_type == "minimax":  # the layers its sliding mask reaches
        windowed = {i for i, k in enumerate(kinds) if k == "full_attention"}
        kinds = _minimax_kinds(kinds)
    layers = []
    for i, kind in enumerate(kinds):
        rope: str | None = "global"
        temperature = None
        if kind in ("linear_attention", "conv", "mamba") or not no_rope[i] or \
                config_reader._granite_nope(text, model_type):
            rope = None
        elif kind == "cross_attention":  # Mllama's: the image's states, unrotated
            rope = None
        elif model_type == "zamba2" and (kind != "hybrid"
                                         or not text.get("use_mem_rope", False)):
            # Zamba2Attention (the shared transformer of the "hybrid" layers, which
            # caches as that layer) rotates only if config.use_mem_rope (default
            # False); the Mamba-2 layers have no positions
            rope = None
        elif kind == "recurrent" or model_type in config_reader.NOT_ROTARY:
            rope = None  # attention-free, or positions that are not rotary
        elif _per_type_none(text, kind):
            rope = None  # a 5.x rope_parameters entry of None: no positions
        elif _layer_theta(text, model_type, i, n) == 0:
            rope = None  # GraniteSWA: a layer_rope_theta of 0 is a NoPE layer
        elif model_type in ("afmoe", "lara_mini") and kind != "sliding_attention":
            # AfmoeAttention rotates only if is_local_attention; LaraMiniModel
            # passes position_embeddings to its sliding layers only
            rope = None
        elif model_type in ("cohere2", "cohere2_moe", "flint") and not (
                kind == "sliding_attention" and window is not None) and not \
                _force_rope(text, model_type, i, n, used):
            rope = None  # Cohere2Attention: RoPE only if its window is not None
        elif model_type in ("exaone4", "exaone_moe", "kolibri1") and \
                window is not None and kind != "sliding_attention":
            rope = None  # Exaone4Attention: sliding_window is None or is_sliding
        elif kind == "sliding_attention" and model_type in ("gemma3", "gemma3n",
                                                             "olmo3"):
            rope = "local"
        if model_type == "llama4" and not no_rope[i] and \
                _field(text, model_type, "attn_temperature_tuning", used):
            temperature = {"attn_scale": _field(text, model_type, "attn_scale", used),
                           "floor_scale": _field(text, model_type, "floor_scale",
                                                 used)}
        if model_type == "beam" and _per_type_none(text, kind):
            # BeamModel scales the queries of its layers without RoPE
            # (compute_attention_scaling, "scalable softmax"; 5.24.0)
            temperature = {"formula": "(1 + (p + 1)/2048)^0.1",
                           "source": "BeamModel (compute_attention_scaling)"}
        span = None
        if kind == "sliding_attention":
            span = window
        elif model_type == "minimax" and i in windowed:
            span = window  # its "full_attention" layers: the sliding mask
        elif kind == "hybrid_sliding" and model_type in INKLING:
            span = window
        elif kind == "chunked_attention":
            span = _field(text, model_type, "attention_chunk_size", used)
        layers.append(LayerRope(i, kind, rope, span, temperature))
    return layers, text, model_type, used


def windowed_length(config: Mapping) -> int | None:
    """For a config that states no length (no ``max_position_embeddings``),
    the window every layer that rotates attends within, if they all share one
    (RecurrentGemma's ``attention_window_size``): no distance reaches it, so it
    stands for the length ``L`` the inspector judges frequencies at; else
    ``None``."""
    text, _ = config_reader._text_config(config)
    if any(text.get(n) is not None for n in ("max_position_embeddings", "n_positions",
                                             "original_max_position_embeddings")):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layout = layer_layout(config)
    except ValueError:
        return None
    spans = {x.window for x in layout if x.rope is not None}
    return spans.pop() if len(spans) == 1 and None not in spans else None


def layer_types(config: Mapping) -> list[str]:
    """The attention type of every layer, as the model's config class fills in
    ``layer_types`` (transformers 4.57.6)."""
    return [layer.attention for layer in layer_layout(config)]


def layer_layout(config: Mapping, *, key_layer_types: bool = False) -> list[LayerRope]:
    """Every layer's positional set-up (see the module docstring).

    ``key_layer_types=True`` reads a ``layer_types`` key as the layers even
    where the config class does not define it (what vLLM's Llama does:
    ``vllm/model_executor/models/llama.py``, ``LlamaAttention``, gives a layer
    the key calls ``"sliding_attention"`` the config's ``sliding_window``);
    by default such a key is ignored, as the model's own masks ignore it,
    with an ``IgnoredKeyWarning``.

    Warns:
        DefaultValueWarning: for a field the layout needs and the config leaves
            out, filled in from its config class's default.
    """
    layers, _, model_type, used = _layout(config, key_layer_types=key_layer_types)
    _defaults_warning(used, model_type)
    return layers


def _olmo3_local_base(top, transformers_version: str | None):
    """The base of OLMo 3's sliding layers for a 4.x-layout config whose
    top-level ``rope_theta`` is ``top`` (see :func:`layer_config`)."""
    five = config_reader.V5_NESTED_DEFAULTS["olmo3"][2]
    major = config_reader._reading_major(transformers_version)
    if top != five:
        warnings.warn(
            f"OLMo 3's sliding layers with rope_theta {top!r} at the top level (no "
            f"rope_parameters): transformers 4.57 rotates them with {top!r}, 5.x "
            f"with Olmo3Config's default {five!r} (the full layers keep {top!r}); "
            f"read as {major}.x does (transformers_version= picks the release; "
            f"a per-layer-type rope_parameters states both)",
            config_reader.VersionDependentWarning, stacklevel=4)
    return five if major >= 5 else top


def layer_config(config: Mapping, layer: int, *,
                 transformers_version: str | None = None) -> dict | None:
    """A config whose single RoPE is layer ``layer``'s, or ``None`` for a layer
    without RoPE.

    ``transformers_version`` (default: the installed transformers) matters for
    one case, where the two releases' code differs: OLMo 3's sliding layers in a
    config of the 4.x layout (top-level ``rope_theta``, no ``rope_parameters``)
    rotate with that ``rope_theta`` in 4.57.6 (``Olmo3Model.rotary_embs``) and
    with ``Olmo3Config``'s default 500,000 in 5.24.0 (its
    ``convert_rope_params_to_dict`` pops the top-level value into the full
    layers' entry first); a :class:`~posenc_lib.config_reader.VersionDependentWarning`
    gives both when they differ.

    Raises:
        ValueError: naming ``layer`` when it is not an index of the model's
            layers, or a ``transformers_version`` that is not a 4.x or 5.x
            release.
    """
    with config_reader.reading_release(transformers_version):
        if transformers_version is not None:
            config_reader._reading_major(transformers_version)  # a bad version raises
        layers, text, model_type, used = _layout(config)
        if isinstance(layer, bool) or not isinstance(layer, int) or \
                not 0 <= layer < len(layers):
            raise ValueError(f"layer must be an int in [0, {len(layers)}) (the model has "
                             f"{len(layers)} layers), got {layer!r}")
        entry = layers[layer]
        if entry.rope is None:
            _defaults_warning(used, model_type)
            return None
        # a 5.x heterogeneous config: this layer's own fields (Gemma 4's head size),
        # resolved here, so that the layer's config carries no overrides of its own
        overrides = config_reader.layer_overrides(text, model_type).get(layer, {})
        out = {**text, **overrides, "model_type": model_type}
        theta = _layer_theta(text, model_type, layer, len(layers))
        if theta is not None:  # GraniteSWA: this layer's base replaces the global one
            block = text.get("rope_parameters")
            if isinstance(block, Mapping):
                out["rope_parameters"] = {**block, "rope_theta": theta}
                out.pop("rope_theta", None)  # replaced, not a second base
            else:
                out["rope_theta"] = theta
        if "per_layer_config" in text or overrides or \
                model_type in config_reader.PER_LAYER_DEFAULT_TYPES:
            out["per_layer_config"] = {}
        if model_type == "deepseek_v4":  # two entries, by label (main, compress)
            label = config_reader.DEEPSEEK_V4_LABELS.get(entry.attention)
            if label is None:  # DeepseekV4Config's validate_layer_type refuses it
                raise ValueError(
                    f"layer {layer} of this deepseek_v4 config is {entry.attention!r}; "
                    f"DeepSeek-V4's layers are "
                    f"{', '.join(map(repr, config_reader.DEEPSEEK_V4_LABELS))} "
                    f"(transformers 5.x refuses other names)")
            out["rope_parameters"] = dict(text["rope_parameters"][label])
            out[config_reader.LAYER_TYPE_KEY] = entry.attention
            _defaults_warning(used, model_type)
            return out
        nested = text.get("rope_parameters")
        if config_reader.is_per_layer_type(nested):
            # transformers 5.x: one rope_parameters per layer type, as stated
            if entry.attention not in nested:
                raise ValueError(f"rope_parameters has no entry for layer {layer}'s "
                                 f"type {entry.attention!r} (it has {sorted(nested)})")
            out["rope_parameters"] = dict(nested[entry.attention])
            out[config_reader.LAYER_TYPE_KEY] = entry.attention
            _defaults_warning(used, model_type)
            return out
        if entry.rope == "local":
            if text.get("rope_parameters") is not None:
                out.pop("rope_parameters")
            out["rope_scaling"] = None
            if model_type == "gemma3":  # Gemma3TextModel.rotary_emb_local
                out["rope_theta"] = _field(text, model_type, "rope_local_base_freq", used)
            elif model_type == "gemma3n":  # Gemma3nTextModel.rotary_emb_local
                # (Gemma3nTextConfig's default rope_local_base_freq: 10,000)
                local = text.get("rope_local_base_freq")
                out["rope_theta"] = 10_000.0 if local is None else local
            elif model_type == "olmo3" and text.get("rope_theta") is not None:
                out["rope_theta"] = _olmo3_local_base(text["rope_theta"],
                                                      transformers_version)
        _defaults_warning(used, model_type)
        return out
