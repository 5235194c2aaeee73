"""Reading the positional set-up out of a model's ``config.json`` (private helpers).

:func:`parse_rope_config` turns a mapping, exactly as found in a Hugging Face
``config.json``, into the arguments of :func:`posenc_lib.scaling.rope_parameters`
plus the lengths the inspector needs. It reads the three layouts transformers
has used:

* **4.x, ``rope_type``**: top-level ``rope_theta`` and a ``rope_scaling``
  dictionary that names its method in ``rope_type`` (transformers 4.43 and later);
* **4.x, ``type``**: the same with the older key ``type`` (Llama 2 era
  configs, DeepSeek-V3, Phi-3), which transformers copies into ``rope_type``;
* **5.x**: one ``rope_parameters`` dictionary that also holds ``rope_theta``
  and ``partial_rotary_factor`` (``RotaryEmbeddingConfigMixin`` in
  transformers' ``modeling_rope_utils.py`` on the main branch).

The behaviour to reproduce is transformers 4.57.6's: its config classes
(``LlamaConfig.__init__`` and friends), ``rope_config_validation`` with the
per-type validators, and the ``ROPE_INIT_FUNCTIONS`` (all in
``src/transformers/modeling_rope_utils.py`` and ``models/*/configuration_*.py``).
Where 4.57.6 and 5.x would compute different numbers from the same file, the
config is ambiguous and a ``ValueError`` says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import _defaults, _validate, _validate_config

#: Keys of the rope block each method accepts (transformers 4.57.6's validators:
#: required keys first, then optional ones); ``rope_type``/``type`` aside.
ROPE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor",), ("original_max_position_embeddings",)),
    "yarn": (("factor",), ("attention_factor", "beta_fast", "beta_slow",
                           "original_max_position_embeddings", "mscale",
                           "mscale_all_dim", "truncate")),
    "longrope": (("short_factor", "long_factor"),
                 ("attention_factor", "factor", "original_max_position_embeddings")),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor",
                "high_freq_factor"), ()),
}

class UnknownRopeKeyWarning(UserWarning):
    """A key of the rope block that transformers does not read (and ignores)."""


class DefaultValueWarning(UserWarning):
    """A field the config leaves out, filled in with its config class's default."""


class _Problems:
    """Collects the ``ValueError`` messages of independent checks, so that one
    error lists every problem of a config instead of the first one met."""

    def __init__(self):
        self.messages: list[str] = []

    def check(self, fn, *args, default=None, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as error:
            self.messages.append(str(error))
            return default

    def raise_if_any(self) -> None:
        if len(self.messages) == 1:
            raise ValueError(self.messages[0])
        if self.messages:
            listed = "; ".join(f"({i}) {m}" for i, m in enumerate(self.messages, 1))
            raise ValueError(f"config has {len(self.messages)} problems: {listed}")


#: Model types whose rotary module reads an NTK ``alpha`` from a ``"dynamic"``
#: rope block (``HunYuanDenseV1RotaryEmbedding`` / ``HunYuanMoEV1RotaryEmbedding``
#: in transformers 4.57: ``base · alpha^(d/(d-2))`` with ``d = head_dim``).
NTK_ALPHA_MODELS = ("hunyuan_v1_dense", "hunyuan_v1_moe")


#: Keys some config classes exempt from validation (Qwen2-VL, Qwen2.5-VL,
#: Qwen3-VL, GLM-4V pass them as ``ignore_keys``): M-RoPE's axis allocation.
IGNORED_ROPE_KEYS = ("mrope_section", "mrope_interleaved")

#: The fields that fix the rotary frequencies, as a config class fills them in
#: when ``config.json`` omits them: ``posenc_lib._defaults.MODEL_DEFAULTS``
#: (kept in the base layer, where the validator reads it too).
MODEL_DEFAULTS = _defaults.MODEL_DEFAULTS
#: ``{model_type: {field: value}}``: the class defaults that transformers
#: 5.24.0 fills in differently from 4.57.6 (Cohere's, Falcon-H1's, OLMo 3's
#: and Persimmon's ``rope_theta``), which :func:`parse_rope_config` uses when
#: it reads as a 5.x release (``tests/test_class_defaults.py`` rebuilds it
#: from both releases' classes).
MODEL_DEFAULTS_5_CHANGED = _defaults.MODEL_DEFAULTS_5_CHANGED
#: Model types whose modelling code fixes the base (no config field): GPT-J and
#: CodeGen (``create_sinusoidal_positions``: ``10000 ** (arange(0, dim, 2) / dim)``
#: in ``modeling_gptj.py`` / ``modeling_codegen.py``, transformers 4.57.6).
FIXED_BASE = {"gptj": 10000.0, "codegen": 10000.0,
              # RoFormerSinusoidalPositionalEmbedding._init_weight: 10000 in
              # the code (models/roformer/modeling_roformer.py, 4.57.6 and 5.24.0)
              "roformer": 10000.0}
# Names that stand for the same field (a default is not used if any is present).
_SAME_FIELD = {"rope_theta": ("rope_theta", "rotary_emb_base"),
               "rotary_emb_base": ("rope_theta", "rotary_emb_base"),
               "partial_rotary_factor": ("partial_rotary_factor", "rotary_pct"),
               "rotary_pct": ("partial_rotary_factor", "rotary_pct"),
               "head_dim": ("head_dim",), "qk_rope_head_dim": ("qk_rope_head_dim",),
               "max_position_embeddings": ("max_position_embeddings",)}

#: Model types whose positions are not rotary, and what they use instead.
NOT_ROTARY = {
    "bloom": "ALiBi", "mpt": "ALiBi", "t5": "T5 relative buckets",
    "mt5": "T5 relative buckets", "umt5": "T5 relative buckets",
    "longt5": "T5 relative buckets", "gpt2": "learned absolute positions",
    "bert": "learned absolute positions", "roberta": "learned absolute positions",
    "opt": "learned absolute positions",
    # transformers 4.57.6's causal-LM types without RoPE (their modelling files:
    # a learned position table, sinusoids added to the input, or a relative
    # scheme of their own); scripts/conformance.py builds each
    **dict.fromkeys(("gpt-sw3", "openai-gpt", "gpt_bigcode", "gpt_neo", "biogpt",
                     "bert-generation", "roberta-prelayernorm", "xlm-roberta",
                     "xlm-roberta-xl", "camembert", "data2vec-text", "electra",
                     "ernie", "megatron-bert", "rembert", "roc_bert", "xmod",
                     "big_bird", "git", "trocr", "whisper", "plbart", "mvp", "bart",
                     "mbart", "blenderbot", "blenderbot-small", "qdqbert", "xlm",
                     "bigbird_pegasus"),
                    "learned absolute positions"),
    **dict.fromkeys(("xglm", "speech_to_text_2", "marian", "pegasus", "ctrl",
                     "musicgen", "musicgen_melody"),
                    "sinusoidal absolute positions"),
    "mega": "relative position bias",
    "transfo-xl": "relative sinusoidal positions (Transformer-XL)",
    "xlnet": "relative sinusoidal positions (Transformer-XL)",
    "reformer": "axial position embeddings", "prophetnet": "learned relative buckets",
    "xlm-prophetnet": "learned relative buckets",
    # CpmAntAttention adds a learned bucketed position_bias to the scores
    # (models/cpmant/modeling_cpmant.py, 4.57.6 and 5.24.0)
    "cpmant": "relative position bias",
    # transformers 5.24.0's KimiLinear: MLA layers whose k_rot is never rotated,
    # KDA layers without positions (models/kimi_linear/modeling_kimi_linear.py)
    "kimi_linear": "no positional encoding (NoPE)",
}
#: Model types without attention (transformers 4.57.6): no positions at all, no
#: keys or values; each layer keeps a fixed recurrent state.
ATTENTION_FREE = {"mamba": "mamba", "mamba2": "mamba", "falcon_mamba": "mamba",
                  "rwkv": "recurrent", "xlstm": "recurrent"}
NOT_ROTARY.update({name: "no positions (attention-free: a recurrent state)"
                   for name in ATTENTION_FREE})
#: Hybrids whose attention layers apply no RoPE (JambaAttention and
#: ZambaAttention build no rotary embedding; transformers 4.57.6 and 5.24.0,
#: models/jamba/modeling_jamba.py, models/zamba/modeling_zamba.py).
NOT_ROTARY["jamba"] = "no positional encoding (NoPE)"
NOT_ROTARY["zamba"] = "no positional encoding (NoPE)"
#: Nemotron-H (5.24.0): NemotronHAttention applies no rotary embedding (its
#: file defines apply_rotary_pos_emb and never calls it); the Mamba-2 layers
#: carry the order.
NOT_ROTARY["nemotron_h"] = "no positional encoding (NoPE)"
#: Inkling's text models (5.24.0: ``models/inkling``, ``inkling2``,
#: ``inkling2_loop``): no rotary embedding in the text stack (the only one,
#: Inkling2's, is in its vision tower). Each attention adds logits from a
#: learned bank over the distance ``q - k`` (``InklingRelativeLogits``,
#: ``Inkling2RelativePositionBias``: zero beyond ``rel_extent``, or the window
#: on sliding layers) and convolves keys and values with short causal filters.
NOT_ROTARY.update(dict.fromkeys(
    ("inkling", "inkling_text", "inkling2", "inkling2_text", "inkling2_loop",
     "inkling2_loop_text"),
    "relative-position logits and short causal convolutions (no RoPE)"))

#: Names config classes give the layer count (their ``attribute_map`` maps them
#: onto ``num_hidden_layers``: GPT-2 ``n_layer``, MPT/DBRX ``n_layers``, ...).
#: All are read for a model type neither transformers release registers; a
#: registered type's config is first reduced to the names its own class reads
#: (``posenc_lib/data/config_names.json``, measured by
#: ``scripts/config_names.py``).
LAYER_ALIASES = ("num_hidden_layers", "n_layer", "num_layers", "n_layers",
                 "decoder_layers")


def num_layers(text: Mapping):
    """The config's layer count under any of :data:`LAYER_ALIASES`, or ``None``
    (LongCat-Flash: its attention layers, two per decoder layer, ``2 x
    num_layers``; Nemotron-H: the length of its block list or pattern, whatever
    ``num_hidden_layers`` says)."""
    if text.get("model_type") == "longcat_flash":
        return _longcat_layers(text)
    if text.get("model_type") == "nemotron_h":  # the block list's length
        return len(nemotron_h_layer_types(text))
    return _one_of_aliases(text, LAYER_ALIASES)[1]


#: ``NemotronHConfig._pattern_to_list`` (5.24.0): the legacy
#: ``hybrid_override_pattern``'s characters as layer types.
NEMOTRON_H_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention",
                      "-": "mlp"}


def nemotron_h_layer_types(text: Mapping) -> list[str]:
    """Nemotron-H's block types as ``NemotronHConfig.__post_init__`` (5.24.0)
    fills them in: ``layers_block_type`` (alias ``layer_types``), else the
    legacy ``hybrid_override_pattern`` (``M`` Mamba-2, ``*`` attention, ``-``
    MLP, ``E`` mixture of experts), else its default of four blocks. The layer
    count is the list's length, whatever ``num_hidden_layers`` says.

    Raises:
        ValueError: naming the field, for a pattern character or a block type
            the class does not know.
    """
    given = text.get("layers_block_type", text.get("layer_types"))
    if given is None and text.get("hybrid_override_pattern") is not None:
        pattern = text["hybrid_override_pattern"]
        bad = sorted(set(str(pattern)) - set(NEMOTRON_H_PATTERN))
        if not isinstance(pattern, str) or bad or not pattern:
            raise ValueError(f"hybrid_override_pattern must be a non-empty string of "
                             f"{''.join(NEMOTRON_H_PATTERN)}, got {pattern!r}")
        return [NEMOTRON_H_PATTERN[c] for c in pattern]
    if given is None:
        return ["linear_attention", "moe", "full_attention", "mlp"]
    allowed = set(NEMOTRON_H_PATTERN.values())
    if not isinstance(given, (list, tuple)) or not given or \
            not set(given) <= allowed:
        raise ValueError(f"layers_block_type must be a non-empty list of "
                         f"{sorted(allowed)}, got {given!r}")
    return list(given)


def _longcat_layers(text: Mapping) -> int:
    """LongCat-Flash's attention layers (and cache layers): ``2 x num_layers``,
    two attention sublayers per decoder layer. 4.57.6's ``LongcatFlashModel``
    builds ``num_layers`` decoder layers (default 28) and overwrites
    ``num_hidden_layers`` with twice that (``modeling_longcat_flash.py`` lines
    531-539); 5.24.0's ``LongcatFlashConfig`` derives ``num_layers`` from a
    given ``num_hidden_layers`` (``num_hidden_layers // 2``, its setter) and
    ``num_hidden_layers`` from ``num_layers`` otherwise. Where the two differ
    (``num_hidden_layers`` alone, or not twice ``num_layers``), the installed
    release's reading, with a :class:`VersionDependentWarning`."""
    layers = text.get("num_layers")
    layers = 28 if layers is None else _validate.positive_int("num_layers", layers)
    hidden = text.get("num_hidden_layers")
    if hidden is None or hidden == 2 * layers:
        return 2 * layers
    hidden = _validate.positive_int("num_hidden_layers", hidden)
    five = 2 * (hidden // 2)
    major = _reading_major(None)
    warnings.warn(f"LongCat-Flash with num_hidden_layers {hidden} and num_layers "
                  f"{text.get('num_layers')!r}: transformers 4.57 builds 2 x "
                  f"{layers} = {2 * layers} attention layers (num_layers wins), 5.x "
                  f"{five} (num_hidden_layers // 2 decoder layers); read as the "
                  f"installed {major}.x does", VersionDependentWarning, stacklevel=3)
    return five if major >= 5 else 2 * layers

# Aliases some config classes map onto the canonical names (attribute_map).
_HIDDEN_ALIASES = ("hidden_size", "n_embd", "n_embed", "d_model", "emb_dim")
_HEADS_ALIASES = ("num_attention_heads", "n_head", "num_heads", "n_heads",
                  "attention_heads", "decoder_attention_heads")


@dataclass(frozen=True)
class RopeConfig:
    """The rotary set-up read from a config.

    Attributes:
        rope_type: transformers' method name after normalisation.
        dim: rotated features per head, ``int(head_dim · partial_rotary_factor)``.
        head_dim: features per attention head.
        partial_rotary_factor: share of ``head_dim`` that is rotated.
        base: ``rope_theta``.
        params: keyword arguments of :func:`~posenc_lib.scaling.rope_parameters`.
        max_position_embeddings: the config's ``max_position_embeddings`` (or ``None``).
        original_max_position_embeddings: the pre-extension context length, for
            methods that have one (``None`` otherwise).
        factor: the extension factor in effect (``None`` without one).
        mrope_section: M-RoPE's pairs per axis, if the config gives them.
        layout: ``"4.x rope_type"``, ``"4.x type"``, ``"5.x"`` or ``"none"``.
        model_type: the config's ``model_type`` (or ``None``).
        ntk_alpha: Hunyuan's NTK ``alpha`` (``rope_type`` is then ``"ntk"``
            with ``factor = alpha``), else ``None``.
        dynamic_params: for Hunyuan's ``alpha`` only, the ``"dynamic"``
            parameters its module switches to beyond ``max_position_embeddings``
            (transformers' ``dynamic_rope_update``), or ``None``.
        defaults_used: the fields filled in from the config class's defaults.
    """

    rope_type: str
    dim: int
    head_dim: int
    partial_rotary_factor: float
    base: float
    params: dict = field(default_factory=dict)
    max_position_embeddings: int | None = None
    original_max_position_embeddings: int | None = None
    factor: float | None = None
    mrope_section: tuple | None = None
    layout: str = "none"
    model_type: str | None = None
    ntk_alpha: float | None = None
    dynamic_params: dict | None = None
    defaults_used: tuple = ()

    @property
    def train_length(self) -> int | None:
        """``L``: the length before extension if the config names one
        (``original_max_position_embeddings``), else ``max_position_embeddings``,
        the length the config allows (not necessarily the training length)."""
        return self.original_max_position_embeddings or self.max_position_embeddings

    @property
    def extended_length(self) -> int | None:
        """The length the config extends the context to. It is
        ``max_position_embeddings`` when that exceeds the original length, else, for YaRN, ``factor · train_length``
        (transformers' YaRN validator expects that length; Qwen2.5's recipe
        leaves ``max_position_embeddings`` at the original length). ``None``
        for plain RoPE and wherever the config names no length before the
        extension (linear and dynamic scaling: ``max_position_embeddings`` may
        already be the extended length, as in Gemma 3)."""
        train = self.train_length
        if self.rope_type == "default" or train is None:
            return None
        if self.max_position_embeddings and self.max_position_embeddings > train:
            return self.max_position_embeddings
        if self.rope_type == "yarn" and self.factor is not None and self.factor > 1:
            return round(self.factor * train)
        return None


def _one_of_aliases(config: Mapping, names: tuple) -> tuple[str | None, Any]:
    found = {name: config[name] for name in names if config.get(name) is not None}
    if len(set(map(repr, found.values()))) > 1:
        raise ValueError(f"config is ambiguous: {found} name the same quantity with "
                         "different values")
    if not found:
        return None, None
    name = next(iter(found))
    return name, found[name]


class V5LayoutWarning(UserWarning):
    """A 5.x per-layer-type ``rope_parameters`` read as transformers 5.x reads
    it, where its config class fills in or merges a value."""


#: Config classes of transformers 5.x (5.24.0) that fill in a per-layer-type
#: ``rope_parameters`` themselves (``convert_rope_params_to_dict`` in
#: ``models/gemma3/configuration_gemma3.py`` and
#: ``models/gemma3n/configuration_gemma3n.py``, the same code, and
#: ``models/olmo3/configuration_olmo3.py``, huggingface/transformers v5.24.0):
#: the class default of the full layers' base, the key whose value becomes the
#: sliding layers' base when their entry has none (``None``: the top-level
#: ``rope_theta``, already taken by the full layers' ``kwargs.pop``, so never),
#: and the default of that base. ``scripts/check_v5.py`` compares the reading
#: with transformers 5.24.0.
V5_NESTED_DEFAULTS = {
    "gemma3": (1_000_000.0, "rope_local_base_freq", 10_000.0),
    "gemma3n": (1_000_000.0, "rope_local_base_freq", 10_000.0),
    "olmo3": (500_000.0, None, 500_000.0),
}


#: The key :func:`posenc_lib.per_layer.layer_config` adds to a layer's config
#: when it took the layer's entry of a per-layer-type ``rope_parameters``: that
#: one-block ``rope_parameters`` is the layer's own, not a file's.
LAYER_TYPE_KEY = "rope_parameters_layer_type"


def _is_flat_block(nested) -> bool:
    """A one-block ``rope_parameters`` (``rope_type``, ``rope_theta``, ...)
    rather than one entry per layer type."""
    return isinstance(nested, Mapping) and bool(nested) and \
        not is_per_layer_type(nested) and \
        not any(isinstance(v, Mapping) for v in nested.values())


def _v5_nested(text: dict, model_type: str | None) -> dict:
    """``text`` with a per-layer-type ``rope_parameters`` completed as the 5.x
    config class completes it (see :data:`V5_NESTED_DEFAULTS`), each filled or
    merged value reported in one :class:`V5LayoutWarning`:

    * a legacy ``rope_scaling`` beside it is merged into ``full_attention``
      (its keys win, ``dict.update``);
    * a missing ``full_attention`` or ``sliding_attention`` entry becomes
      ``{"rope_type": "default"}``;
    * ``full_attention`` without ``rope_theta`` takes the top-level
      ``rope_theta``, else the class default; with one, a differing top-level
      ``rope_theta`` is ignored (``setdefault``);
    * ``sliding_attention`` without ``rope_theta`` takes Gemma 3's
      ``rope_local_base_freq``, else the class default (not the top-level
      ``rope_theta``);
    * a one-block ``rope_parameters`` is ignored: the class adds the two
      entries beside its keys, and the model reads only those (transformers
      5.24.0's tiny Gemma 3, Gemma 3n and OLMo 3 models, stored in
      ``results/config_forms-5.json``).
    """
    name = (model_type or "").removesuffix("_text")
    nested = text.get("rope_parameters")
    flat = name in V5_NESTED_DEFAULTS and _is_flat_block(nested) and \
        text.get(LAYER_TYPE_KEY) is None  # not one layer's entry, already read
    if name not in V5_NESTED_DEFAULTS or not (flat or is_per_layer_type(nested)):
        return text
    full_default, local_key, local_default = V5_NESTED_DEFAULTS[name]
    params = {} if flat else {k: dict(v) for k, v in nested.items()}
    notes = [f"the one-block rope_parameters {dict(nested)} is ignored (the class "
             f"adds one entry per layer type beside it, and the model reads those)"
             ] if flat else []
    scaling = text.get("rope_scaling")
    if scaling is not None:
        if not isinstance(scaling, Mapping):
            raise ValueError(f"rope_scaling must be a mapping or null, got {scaling!r}")
        if "full_attention" not in params:
            raise ValueError("config has a legacy rope_scaling and a per-layer-type "
                             "rope_parameters without full_attention: transformers "
                             "5.x merges rope_scaling into that entry (and fails)")
        params["full_attention"].update(scaling)
        notes.append(f"the legacy rope_scaling {dict(scaling)} is merged into "
                     f"rope_parameters['full_attention']")
    for kind in ("full_attention", "sliding_attention"):
        if kind not in params:
            params[kind] = {"rope_type": "default"}
            notes.append(f"rope_parameters has no {kind!r} entry: "
                         f"{{'rope_type': 'default'}}")
    top = text.get("rope_theta")
    full = params["full_attention"]
    if "rope_theta" not in full:
        full["rope_theta"] = top if top is not None else full_default
        notes.append(f"full_attention's rope_theta is {full['rope_theta']!r} (" +
                     ("the top-level rope_theta)" if top is not None
                      else "the class default)"))
    elif top is not None and top != full["rope_theta"]:
        notes.append(f"the top-level rope_theta {top!r} is ignored: full_attention "
                     f"keeps its own {full['rope_theta']!r}")
    sliding = params["sliding_attention"]
    if "rope_theta" not in sliding:
        given = text.get(local_key) if local_key else None
        sliding["rope_theta"] = given if given is not None else local_default
        notes.append(f"sliding_attention's rope_theta is {sliding['rope_theta']!r} (" +
                     (f"{local_key})" if given is not None else "the class default)"))
    for entry in params.values():  # standardize_rope_params
        entry.setdefault("rope_type", entry.get("type", "default"))
    if notes:
        warnings.warn(f"read as transformers 5.x reads it ({type_name(name)}): "
                      + "; ".join(notes), V5LayoutWarning, stacklevel=4)
    out = {k: v for k, v in text.items()
           if k not in ("rope_scaling", "rope_theta", "rope_local_base_freq")}
    out["rope_parameters"] = params
    return out


def type_name(model_type: str) -> str:
    return {"gemma3": "Gemma3TextConfig", "olmo3": "Olmo3Config"}.get(model_type,
                                                                       model_type)


#: Model types whose checkpoints pair features ``2i, 2i + 1`` (interleaved):
#: DeepSeek-V3 when the config's ``rope_interleave`` is true (its default;
#: transformers 4.57's ``DeepseekV3Attention`` then permutes ``q_pe``/``k_pe``
#: into halves, ``apply_rotary_pos_emb_interleave``), and always (``True``)
#: the models whose ``rotate_half`` takes ``x[..., 0::2]`` and ``x[..., 1::2]``
#: (ERNIE 4.5, GLM, GLM-4, Cohere, Cohere 2, Helium; GLM-4.1V, whose
#: ``apply_multimodal_rotary_pos_emb`` repeats each frequency twice and calls
#: ``rotate_half_llm``, where GLM-4.5V's rotates halves) or whose
#: ``apply_rotary_emb`` views neighbours as one complex number (Llama 4,
#: DeepSeek-V2), GPT-J and CodeGen (``rotate_every_two``), and LongCat-Flash
#: (``apply_rotary_pos_emb_interleave``, as DeepSeek-V3's); of transformers
#: 5.x's new types, those below the comment in the table.
#: Every other model type pairs ``i`` with ``i + d/2`` (``rotate_half``).
#: ``scripts/conformance.py`` observes the pairs of every causal-LM type
#: transformers registers (one-hot probes through the model file's own
#: ``apply_rotary*``) and compares them with this table.
INTERLEAVED_PAIRS = {"deepseek_v3": "rope_interleave", "ernie4_5": True,
                     "ernie4_5_moe": True, "glm": True, "glm4": True, "cohere": True,
                     "cohere2": True, "helium": True, "llama4": True, "glm4v": True,
                     "deepseek_v2": True, "gptj": True, "codegen": True,
                     "longcat_flash": True,
                     # transformers 5.x types: DeepSeek-V3's switch, or always
                     "axk1": "rope_interleave", "glm4_moe_lite": "rope_interleave",
                     "youtu": "rope_interleave", "sarvam_mla": "rope_interleave",
                     "axk2": True, "bailing_hybrid": True, "glm_moe_dsa": True,
                     "cohere2_moe": True,
                     # DeepseekV4's rotate_half pairs (2i, 2i + 1) on a head's
                     # last rotary-dim features (modeling_deepseek_v4.py)
                     "deepseek_v4": True,
                     # Dots3NoteTextAttention: apply_rotary_pos_emb_interleave
                     "dots3_note": True,
                     # RoFormerSelfAttention.apply_rotary_position_embeddings:
                     # sin/cos repeated pairwise, [-x1, x0, -x3, x2, ...]
                     "roformer": True,
                     # M-RoPE types (5.24.0): results/mrope-5.json
                     "glm_ocr": True, "ernie4_5_vl_moe": True, "hy_v4_vl": True}


def _pair_layout(config: Mapping) -> str:
    """``"interleaved"`` or ``"half"``: which features form a rotary pair in the
    weights, as transformers reads them (4.57.6 and 5.24.0; see
    :data:`INTERLEAVED_PAIRS`)."""
    text, model_type = _text_config(config)
    flag = INTERLEAVED_PAIRS.get((model_type or "").removesuffix("_text"))
    if flag is True:
        return "interleaved"
    return "interleaved" if flag and text.get(flag, True) else "half"


def _text_config(config: Mapping) -> tuple[dict, str | None]:
    """The mapping that holds the language model's fields, and the model_type
    (a 5.x per-layer-type ``rope_parameters`` completed as 5.x completes it)."""
    _validate_config.validate_config(config)  # layout fields, each named
    text, model_type = _raw_text_config(config)
    if _fills_per_type_rope(text, model_type):
        text = {**text, "rope_parameters": copy.deepcopy(
            PER_TYPE_ROPE_DEFAULTS[(model_type or "").removesuffix("_text")])}
    return _v5_nested(text, model_type), model_type


#: DeepSeek-V4's layer types and the ``rope_parameters`` entry each rotates
#: with (5.24.0 ``DeepseekV4Attention``, ``models/deepseek_v4/
#: modeling_deepseek_v4.py``: the sliding layers ``main``, the compressed
#: ones ``compress`` for their queries, keys, compressed keys and indexer).
DEEPSEEK_V4_LABELS = {"sliding_attention": "main",
                      "compressed_sparse_attention": "compress",
                      "heavily_compressed_attention": "compress"}
#: ``DeepseekV4Config``'s legacy per-layer ``compress_ratios`` as layer types.
DEEPSEEK_V4_RATIOS = {0: "sliding_attention", 4: "compressed_sparse_attention",
                      128: "heavily_compressed_attention"}


def deepseek_v4_rope(text: Mapping) -> dict:
    """DeepSeek-V4's two RoPE entries, ``{"main": ..., "compress": ...}``, as
    ``DeepseekV4Config`` (5.24.0) resolves them, each with its rotary share:

    * ``rope_parameters`` (or a non-empty ``rope_scaling``, which replaces it)
      with both entries as mappings is kept; an entry without ``rope_theta``
      takes the top-level ``rope_theta`` (10,000 by default; not
      ``compress_rope_theta``), one without ``partial_rotary_factor`` the
      top-level factor where the file gives one, else none: the whole head;
    * otherwise both are rebuilt from the top level: ``main`` a plain RoPE of
      base ``rope_theta``, ``compress`` the flat block's scaling (YaRN with an
      ``attention_factor`` of 1.0 unless given) with base
      ``compress_rope_theta`` (160,000), both with the share
      ``partial_rotary_factor``, else the legacy ``qk_rope_head_dim /
      head_dim``, else 64 / 512; a base or share inside the flat block is
      overwritten.

    Checked against the class on generated configs by the config-forms sweep
    (``results/config_forms-5.json``)."""
    block = text.get("rope_scaling") or text.get("rope_parameters") or {}
    if not isinstance(block, Mapping):
        raise ValueError(f"rope_parameters must be a mapping, got {block!r}")
    theta = text.get("rope_theta")
    theta = 10000.0 if theta is None else theta
    top_share = text.get("partial_rotary_factor")
    if isinstance(block.get("main"), Mapping) and isinstance(block.get("compress"),
                                                             Mapping):
        out = {}
        for label in ("main", "compress"):
            entry = dict(block[label])
            entry.setdefault("rope_type", entry.get("type", "default"))
            entry.setdefault("rope_theta", theta)
            if top_share is not None:
                entry.setdefault("partial_rotary_factor", top_share)
            entry.setdefault("partial_rotary_factor", 1.0)
            out[label] = entry
        return out
    head = text.get("head_dim")
    head = 512 if head is None else _validate.positive_int("head_dim", head)
    legacy = text.get("qk_rope_head_dim")
    share = top_share if top_share is not None else (
        legacy / head if legacy is not None else 64 / 512)
    compress_theta = text.get("compress_rope_theta")
    scaling = {k: v for k, v in block.items() if k not in ("main", "compress")}
    scaling.setdefault("rope_type", scaling.get("type", "default"))
    compress = {**scaling, "rope_theta": 160000.0 if compress_theta is None
                else compress_theta, "partial_rotary_factor": share}
    if compress["rope_type"] == "yarn":
        compress.setdefault("attention_factor", 1.0)
    return {"main": {"rope_type": "default", "rope_theta": theta,
                     "partial_rotary_factor": share}, "compress": compress}


def _nested_strays(text: dict, model_type: str | None) -> dict:
    """``text`` without the entries of a per-layer-type ``rope_parameters``
    that are not a layer's (a ``partial_rotary_factor`` beside the blocks),
    each named in an :class:`IgnoredKeyWarning`: transformers 5.24.0 reads
    only the entries under the config's layer types
    (``RotaryEmbeddingConfigMixin.nested_rope_parameter_keys``,
    ``modeling_rope_utils.py``)."""
    nested = text.get("rope_parameters")
    if not isinstance(nested, Mapping) or not any(
            isinstance(v, Mapping) for v in nested.values()):
        return text
    strays = {k: v for k, v in nested.items() if v is not None
              and not isinstance(v, Mapping)}
    if not strays:
        return text
    warnings.warn(f"{model_type}: rope_parameters holds one block per layer type, "
                  f"and transformers 5.x reads only those; ignored beside them: "
                  + ", ".join(f"{k}={v!r}" for k, v in strays.items()),
                  IgnoredKeyWarning, stacklevel=5)
    return {**text, "rope_parameters": {k: v for k, v in nested.items()
                                        if k not in strays}}


#: Config classes whose default ``rope_parameters`` holds one block per layer
#: type, filled in when ``config.json`` has neither ``rope_parameters`` nor
#: ``rope_scaling`` (``Gemma4TextConfig`` and ``Gemma4UnifiedTextConfig``,
#: transformers 5.24.0; ``tests/test_class_defaults.py`` checks them against
#: ``results/class-defaults-5.json``). A top-level ``rope_theta`` does not
#: replace their bases (the classes ``setdefault`` it into each block).
PER_TYPE_ROPE_DEFAULTS = {
    name: {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
           "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                              "rope_theta": 1000000.0}}
    for name in ("gemma4", "gemma4_unified")}
#: MiMoV2FlashConfig's default (5.24.0, results/class-defaults-5.json): a third
#: of each head rotates, the full layers with base 5,000,000
PER_TYPE_ROPE_DEFAULTS["mimo_v2_flash"] = {
    "full_attention": {"rope_type": "default", "partial_rotary_factor": 0.334,
                       "rope_theta": 5000000.0},
    "sliding_attention": {"rope_type": "default", "partial_rotary_factor": 0.334,
                          "rope_theta": 10000.0}}


def _fills_per_type_rope(text: Mapping, model_type) -> bool:
    return ((model_type or "").removesuffix("_text") in PER_TYPE_ROPE_DEFAULTS
            and text.get("rope_parameters") is None and text.get("rope_scaling") is None)


#: Published model types that transformers 4.57 has no class for, read as the
#: class their checkpoints run: Kimi K2's ``config.json`` names
#: ``DeepseekV3ForCausalLM`` and ``configuration_deepseek.DeepseekV3Config``;
#: DeepSeek-V3.2's attention is DeepSeek-V3's (multi-head latent attention,
#: the same rope fields) plus a sparse-attention indexer.
MODEL_TYPE_ALIASES = {"kimi_k2": "deepseek_v3", "deepseek_v32": "deepseek_v3"}


def _alias_wins(config: Mapping, alias: str, target: str, cls: str):
    """The value of ``target`` as a config class whose ``attribute_map`` maps
    ``alias`` onto it leaves it: ``alias``'s where both are given (set after the
    class's own fields), with an :class:`IgnoredKeyWarning` when they differ."""
    given, own = config.get(alias), config.get(target)
    if given is not None and own is not None and given != own:
        warnings.warn(f"{target}={own!r} ignored: {cls} maps {alias} onto {target} "
                      f"and sets the keyword {alias}={given!r} after its own fields "
                      f"(transformers 4.57 and 5.x)", IgnoredKeyWarning, stacklevel=5)
    return own if given is None else given


#: The release whose config classes :func:`_class_names` follows, where a
#: caller names one (``transformers_version=``); ``None``: the installed one.
_RELEASE = contextvars.ContextVar("posenc_reading_release", default=None)


@contextlib.contextmanager
def reading_release(transformers_version: str | None):
    """Within the block, config keys are named as the classes of
    ``transformers_version`` read them (:func:`_class_names`); ``None`` leaves
    the reading as it is (the caller's, else the installed release's). The
    functions that take ``transformers_version=`` run their body in it (a
    ``with`` adds no frame, so their warnings still point at their caller)."""
    if transformers_version is None:
        yield
        return
    token = _RELEASE.set(transformers_version)
    try:
        yield
    finally:
        _RELEASE.reset(token)


@functools.cache
def _names_table() -> tuple[dict, dict]:
    """``(names, {major: {model_type: {field: (order, keep, unordered,
    null_absent)}}})`` from ``data/config_names.json`` (see :func:`_class_names`)."""
    from importlib import resources

    raw = json.loads(resources.files("posenc_lib").joinpath(
        "data", "config_names.json").read_text("utf-8"))
    releases = {}
    for release, groups in raw["releases"].items():
        types = {}
        for group in groups:
            fields = {f: ((f,), (), False, ()) if v == 1 else (tuple(v), (), False, ())
                      if isinstance(v, list) else (tuple(v["order"]),
                                                   tuple(v.get("keep", ())),
                                                   v.get("unordered", False),
                                                   tuple(v.get("null_absent", ())))
                      for f, v in group["fields"].items()}
            types.update(dict.fromkeys(group["types"], fields))
        releases[int(release.split(".")[0])] = types
    return raw["fields"], releases


def _names_as(text: dict, record: dict, names: dict) -> tuple[dict, list[str]]:
    """``text`` with each field of ``record`` as that class reads it, and what
    it drops."""
    out, dropped = dict(text), []
    for name, (order, keep, unordered, null_absent) in record.items():
        # a null is the name's value (an attribute_map alias sets the field to
        # None), but for the keywords a class pops and tests for None
        given = [n for n in order if n in out and (out[n] is not None
                                                   or n not in null_absent)]
        present = [n for n in order if n in out]
        if unordered and len({repr(out[n]) for n in present}) > 1:
            raise ValueError(f"config is ambiguous: {', '.join(present)} all set "
                             f"{name}, and which one wins depends on the class's other "
                             f"fields; give one of them")
        read = out[given[0]] if given else None
        for n in names[name]:
            if n not in order and n not in keep and out.get(n) is not None:
                value = out.pop(n)  # said only where it is not the value read
                if value != read:
                    dropped.append(f"{n}={value!r} (not read as {name})")
        if given:
            value = out[given[0]]
            dropped += [f"{n}={out[n]!r} (it takes {name}={value!r} from "
                        f"{given[0]})" for n in given[1:] if out[n] != value]
            out.update(dict.fromkeys({name, *given}, value))
    return out, dropped


def _only_release(model_type: str | None) -> int | None:
    """4 or 5 where only that transformers release registers ``model_type``
    (4.57.6 or 5.24.0: the types of :func:`_names_table`), else ``None``."""
    has = [major for major, types in _names_table()[1].items() if model_type in types]
    return has[0] if len(has) == 1 else None


def _hrm_layers(text: dict, major: int) -> dict:
    """``HrmTextConfig.__post_init__`` (5.24.0, ``configuration_hrm_text.py``):
    on first construction (no ``num_layers_per_stack``) the given
    ``num_hidden_layers`` is the blocks per stack, and ``num_hidden_layers``
    becomes one cache layer per attention call of the recurrent forward,
    ``blocks x H_cycles x (L_cycles + 1)``; a saved config carries both."""
    if text.get("num_layers_per_stack") is not None:
        return text
    get = {k: text.get(k, d) if text.get(k) is not None else d
           for k, d in (("num_hidden_layers", 16), ("H_cycles", 2), ("L_cycles", 3))}
    blocks = _validate.positive_int("num_hidden_layers", get["num_hidden_layers"])
    high = _validate.positive_int("H_cycles", get["H_cycles"])
    low = _validate.nonnegative_int("L_cycles", get["L_cycles"])
    return {**text, "num_layers_per_stack": blocks,
            "num_hidden_layers": blocks * high * (low + 1)}


def _mimo_window(text: dict, major: int) -> dict:
    """``MiMoV2FlashConfig.__post_init__`` (5.24.0): a ``sliding_window_size``
    sets ``sliding_window`` to one more (the tokens before the query, and the
    query), over any ``sliding_window`` the file gives."""
    size = text.get("sliding_window_size")
    if size is None:
        return text
    window = _validate.positive_int("sliding_window_size", size) + 1
    if text.get("sliding_window") not in (None, window):
        warnings.warn(f"mimo_v2_flash: its config class sets sliding_window = "
                      f"sliding_window_size + 1 = {window} over sliding_window="
                      f"{text['sliding_window']!r}", IgnoredKeyWarning, stacklevel=6)
    return {**text, "sliding_window": window}


def _modernbert_decoder_window(text: dict, major: int) -> dict:
    """``ModernBertDecoderConfig`` sets ``sliding_window = local_attention // 2``
    (``local_attention`` 128 by default; -1 where it is 0 or null), 4.57.6 in
    ``__init__`` over any ``sliding_window`` keyword, 5.24.0 in
    ``__post_init__``, after which a ``sliding_window`` key (not one of its
    fields) is set over it, a null one too (measured on both classes:
    ``tests/test_per_layer.py``)."""
    if major >= 5 and "sliding_window" in text:
        if text["sliding_window"] is None:  # its sliding layers then fail
            raise ValueError("modernbert-decoder: a null sliding_window is set over "
                             "local_attention // 2 by transformers 5.x, and the model "
                             "then fails at its first forward pass; drop the key or "
                             "give a positive integer")
        return text
    local = text.get("local_attention", 128)
    if not local:
        raise ValueError(f"modernbert-decoder: local_attention {local!r} makes its config "
                         f"class's sliding_window -1, which is not modelled; give "
                         f"local_attention as a positive integer (the window is half of it)")
    window = _validate.positive_int("local_attention", local) // 2
    if text.get("sliding_window") not in (None, window):
        warnings.warn(f"modernbert-decoder: its config class sets sliding_window = "
                      f"local_attention // 2 = {window} over sliding_window="
                      f"{text['sliding_window']!r} (transformers 4.57; 5.x keeps the key)",
                      IgnoredKeyWarning, stacklevel=6)
    return {**text, "sliding_window": window}


def _swin_width(text: dict, major: int, embed_dim: int = 96,
                multiplier_key: str | None = None) -> dict:
    """Swin-style classes (4.57.6 and 5.24.0) set ``hidden_size`` to the last
    stage's width, ``embed_dim x multiplier ** (len(depths) - 1)`` (Hiera's
    multiplier is ``embed_dim_multiplier``, the others 2; four stages and
    ``embed_dim`` 96, DiNAT's and NAT's 64, by default); 4.57.6 whatever the
    file gives, 5.24.0 only where it gives no ``hidden_size``."""
    if major >= 5 and text.get("hidden_size") is not None:
        return text
    dim = text.get("embed_dim") if text.get("embed_dim") is not None else embed_dim
    depths = text.get("depths") if text.get("depths") is not None else [0] * 4
    factor = text.get(multiplier_key, 2.0) if multiplier_key else 2
    if not isinstance(depths, (list, tuple)) or not isinstance(factor, (int, float)):
        return text
    dim = _validate.positive_int("embed_dim", dim)
    return {**text, "hidden_size": int(dim * factor ** (len(depths) - 1))}


def _prophetnet_layers(text: dict, major: int) -> dict:
    """``XLMProphetNetConfig.num_hidden_layers`` (4.57.6) is a property, the
    encoder's layers plus the decoder's (12 each by default)."""
    enc, dec = (text.get(k) if text.get(k) is not None else 12
                for k in ("num_encoder_layers", "num_decoder_layers"))
    return {**text, "num_hidden_layers": enc + dec}


def _deepseek_v4_fields(text: dict, major: int) -> dict:
    """DeepSeek-V4's fields as ``DeepseekV4Config`` (5.24.0) leaves them: its
    two RoPE entries resolved (:func:`deepseek_v4_rope`), which replace every
    top-level RoPE key, and no ``qk_rope_head_dim`` (a legacy key the class
    pops; the rotary share is each entry's), ``head_dim`` 512 by default. A
    layer's config (:func:`posenc_lib.per_layer.layer_config`), which holds its
    entry alone, is left as it is."""
    if text.get(LAYER_TYPE_KEY) is not None:
        return text
    out = {k: v for k, v in text.items() if k not in (
        "rope_scaling", "rope_theta", "compress_rope_theta", "partial_rotary_factor",
        "qk_rope_head_dim")}
    out["rope_parameters"] = deepseek_v4_rope(text)
    if out.get("head_dim") is None:
        out["head_dim"] = 512
    return out


def _zamba2_head(text: dict, major: int) -> dict:
    """Zamba2Config (4.57.6 ``__init__``, 5.24.0 ``__post_init__``): its
    attention attends over [hidden states, original embeddings], so its head
    is ``attention_head_dim = 2 x hidden_size // num_attention_heads`` (2560
    and 32 by default), whatever the file gives (5.x maps ``head_dim`` onto
    it)."""
    hidden = text.get("hidden_size") if text.get("hidden_size") is not None else 2560
    heads = text.get("num_attention_heads")
    heads = 32 if heads is None else heads
    head = 2 * _validate.positive_int("hidden_size", hidden) // \
        _validate.positive_int("num_attention_heads", heads)
    return {**text, "head_dim": head, "attention_head_dim": head}


#: ``Dots3NoteTextConfig``'s defaults for its sliding layers' MLA sizes, which
#: the class reads from ``swa_*`` keywords where a config has no
#: ``per_layer_config`` (5.24.0 ``models/dots3_note/configuration_dots3_note.py``,
#: ``__post_init__``); ``qk_rope_head_dim`` defaults to ``head_dim -
#: qk_nope_head_dim``.
DOTS3_NOTE_SLIDING = {"num_attention_heads": 64, "num_key_value_heads": 64,
                      "q_lora_rank": 1024, "kv_lora_rank": 1024, "head_dim": 256,
                      "qk_nope_head_dim": 192, "v_head_dim": 128}
#: Model types whose ``head_dim`` is not their MLA ``qk_rope_head_dim``: Dots 3
#: Note rotates ``int(head_dim x partial_rotary_factor)`` features, the factor
#: being ``qk_rope_head_dim / head_dim`` per layer type.
HEAD_DIM_APART = frozenset({"dots3_note", "dots3_note_text"})


def _dots3_note_fields(text: dict, major: int) -> dict:
    """Dots 3 Note's text fields as ``Dots3NoteTextConfig`` (5.24.0) leaves
    them (``__post_init__`` and ``convert_rope_params_to_dict``):

    * layer types: given, else layers 0, 1 and ``i % 4 == 1`` attend fully,
      the others slide (all attend fully with ``use_sliding_window`` false);
      the full ones are ``indexed_attention`` (DSA) unless ``use_dsa`` is
      false, and a given list is renamed the same way (``use_dsa`` defaults
      to true where the config has no ``per_layer_config``);
    * ``sliding_window`` (null: the keyword ``sliding_window_size``, else 512);
    * without ``per_layer_config``, each sliding layer gets the ``swa_*``
      keywords' MLA sizes (:data:`DOTS3_NOTE_SLIDING`);
    * ``rope_parameters`` one entry per layer type: given (a flat block, or
      ``rope_scaling``, copied to each type), else a plain RoPE of base
      ``swa_rope_theta`` (50,000) on sliding layers and ``rope_theta``
      (80,000,000) on the others; an entry without a base takes
      ``rope_theta``; each entry's ``partial_rotary_factor`` is overwritten
      with its first layer's ``qk_rope_head_dim / head_dim``.

    A layer's config (:func:`posenc_lib.per_layer.layer_config`) is left as
    it is."""
    if text.get(LAYER_TYPE_KEY) is not None:
        return text
    out = dict(text)
    out.setdefault("model_type", "dots3_note_text")
    layers = out.get("num_hidden_layers")
    layers = _validate.positive_int("num_hidden_layers", 46 if layers is None else layers)
    use_dsa = out.pop("use_dsa", None if "per_layer_config" in text else True)
    sliding = out.pop("use_sliding_window", True)
    window = out.pop("sliding_window_size", 512)
    if out.get("sliding_window") is None:
        out["sliding_window"] = window
    kinds = out.get("layer_types")
    if kinds is None:
        full = "full_attention" if use_dsa is False else "indexed_attention"
        kinds = [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention"
                 for i in range(layers)]
    kinds = list(kinds)
    if use_dsa is not None:
        old, new = ("full_attention", "indexed_attention")
        if not use_dsa:
            old, new = new, old
        kinds = [new if kind == old else kind for kind in kinds]
    out["layer_types"] = kinds
    swa = {name: out.pop(f"swa_{name}", value) for name, value in
           DOTS3_NOTE_SLIDING.items()}
    swa["qk_rope_head_dim"] = out.pop("swa_qk_rope_head_dim",
                                      swa["head_dim"] - swa["qk_nope_head_dim"])
    if "per_layer_config" not in text:
        out["per_layer_config"] = {i: dict(swa) for i, kind in enumerate(kinds)
                                   if kind == "sliding_attention"}
    overrides = {int(i): dict(v) for i, v in (out.get("per_layer_config") or {}).items()}
    swa_theta = out.pop("swa_rope_theta", 50_000.0)
    theta = out.pop("rope_theta", None)
    theta = 80_000_000.0 if theta is None else theta
    entries = out.get("rope_parameters")
    if entries is None:
        entries = out.get("rope_scaling") or {
            kind: {"rope_type": "default",
                   "rope_theta": swa_theta if kind == "sliding_attention" else theta}
            for kind in set(kinds)}
    if not is_per_layer_type(entries):
        entries = {kind: dict(entries) for kind in set(kinds)}
    entries = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in entries.items()}
    top = (out.get("qk_rope_head_dim"), out.get("head_dim"))
    top = (64 if top[0] is None else top[0], 256 if top[1] is None else top[1])
    for kind in set(kinds):
        if not isinstance(entries.get(kind), Mapping):
            continue
        entries[kind].setdefault("rope_theta", theta)
        first = overrides.get(kinds.index(kind), {})
        entries[kind]["partial_rotary_factor"] = (
            first.get("qk_rope_head_dim", top[0]) / first.get("head_dim", top[1]))
    out["rope_parameters"] = entries
    for key in ("rope_scaling", "partial_rotary_factor"):
        out.pop(key, None)
    out["qk_rope_head_dim"], out["head_dim"] = top
    return out


def _dory_fields(text: dict, major: int) -> dict:
    """Dory's fields as ``DoryConfig.__post_init__`` (5.24.0,
    ``models/dory/configuration_dory.py``) leaves them. Its saved form (what
    ``to_dict`` writes) follows each layer type with ``"mlp"`` and doubles the
    layer counts; the class drops every other entry and floor-halves
    ``num_hidden_layers``, ``n_input_layers`` and ``n_output_layers`` (their
    defaults 36, 8 and 8 included) and ``n_recurrent_layers`` where given.
    Then ``n_recurrent_layers`` defaults to the layers the other two sections
    leave, and ``rope_parameters`` to a plain RoPE per layer type, base 10,000
    on sliding layers and 10,000,000 on full ones (a top-level ``rope_theta``
    is not read). The sections must add up to ``num_hidden_layers``, and
    ``n_recurrent_loops`` be at least 1, as ``validate_architecture`` asks."""
    if text.get(LAYER_TYPE_KEY) is not None:
        return text
    out = dict(text)
    defaults = {"num_hidden_layers": 36, "n_input_layers": 8, "n_output_layers": 8}
    for key, value in defaults.items():
        if out.get(key) is None:
            out[key] = value
    kinds = out.get("layer_types")
    if isinstance(kinds, (list, tuple)) and "mlp" in kinds:
        out["layer_types"] = list(kinds)[::2]
        halved = [*defaults, *(["n_recurrent_layers"] if out.get(
            "n_recurrent_layers") is not None else [])]
        for key in halved:
            out[key] = _validate.nonnegative_int(key, out[key]) // 2
    layers = _validate.positive_int("num_hidden_layers", out["num_hidden_layers"])
    first, last = (_validate.nonnegative_int(k, out[k])
                   for k in ("n_input_layers", "n_output_layers"))
    if out.get("n_recurrent_layers") is None:
        out["n_recurrent_layers"] = layers - first - last
    middle = out["n_recurrent_layers"]
    loops = out.get("n_recurrent_loops")
    loops = 2 if loops is None else loops
    if first + middle + last != layers or not isinstance(loops, int) or loops < 1:
        raise ValueError(f"n_input_layers ({first}) + n_recurrent_layers ({middle}) + "
                         f"n_output_layers ({last}) must be num_hidden_layers "
                         f"({layers}), and n_recurrent_loops ({loops!r}) at least 1: "
                         f"DoryConfig refuses the config")
    out["n_recurrent_loops"] = loops
    if out.get("layer_types") is None:  # every fourth layer attends fully
        out["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else
                              "sliding_attention" for i in range(layers)]
    kinds = out["layer_types"]
    entries = out.get("rope_parameters")
    if entries is None:
        entries = {kind: {"rope_type": "default", "rope_theta":
                          1e4 if kind == "sliding_attention" else 1e7}
                   for kind in set(kinds)}
        out.pop("rope_theta", None)
    elif not is_per_layer_type(entries):
        raise ValueError("rope_parameters must hold one entry per layer type for "
                         "model_type 'dory': DoryRotaryEmbedding reads "
                         "rope_parameters[layer_type] (a flat block builds a config "
                         "whose model fails)")
    out["rope_parameters"] = entries
    return out


#: Fields a config class computes from others (``"derived"`` in
#: ``results/config-names-*.json``): every such field of either release has a
#: rule here, judged on the probe's forms by ``tests/test_config_names.py``.
DERIVED_FIELDS = {
    "hrm_text": _hrm_layers, "mimo_v2_flash": _mimo_window,
    "modernbert-decoder": _modernbert_decoder_window,
    "deepseek_v4": _deepseek_v4_fields, "zamba2": _zamba2_head,
    "dots3_note_text": _dots3_note_fields, "dory": _dory_fields,
    "xlm-prophetnet": _prophetnet_layers,
    **dict.fromkeys(("swin", "swinv2", "donut-swin", "maskformer-swin"), _swin_width),
    **dict.fromkeys(("dinat", "nat"), lambda text, major: _swin_width(text, major, 64)),
    "hiera": lambda text, major: _swin_width(text, major, 96, "embed_dim_multiplier"),
}


def _class_names(text: dict, model_type: str | None) -> dict:
    """``text`` with six positional fields (layers, hidden size, heads, key
    heads, length, window) under their own names, as ``model_type``'s config
    class reads them: from the names its ``attribute_map`` or ``__init__`` maps
    onto each field, the winner first where several are given (DBRX's
    ``max_seq_len``, Step-3.5's ``num_attention_groups``, BLOOM's ``n_embed``
    over ``hidden_size``), without the names the class does not read as the
    field (``n_layer`` in a Llama config), each dropped value named in an
    :class:`IgnoredKeyWarning`; a ``ValueError`` where the names disagree and
    no order of them predicts the class (one field of one 5.x class). The
    table is measured on the classes of transformers 4.57.6 and 5.24.0
    (``scripts/config_names.py``; checked by ``tests/test_config_names.py``);
    it is read as the requested release reads it (the ``transformers_version``
    of the calling function, else the installed one), with a
    :class:`VersionDependentWarning` where the other would differ. A type
    neither release registers is left as it is."""
    from ._versions import MIMICKED_VERSIONS

    names, releases = _names_table()
    major = _reading_major(_RELEASE.get())
    here, there = (releases.get(m, {}).get(model_type) for m in (major, 9 - major))
    if here is None and there is None:
        return text
    out, dropped = _names_as(text, here if here is not None else there, names)
    if here is not None and there is not None:
        other = _names_as(text, there, names)[0]
        # a key the file gives, or one both releases hold, read differently
        differ = sorted(k for k in {*other, *out}
                        if (k in text or (k in other and k in out))
                        and other.get(k) != out.get(k))
        if differ:
            warnings.warn(
                f"{model_type}: transformers {MIMICKED_VERSIONS[9 - major]} reads "
                + ", ".join(f"{f}={other.get(f)!r}" for f in differ) + " from this "
                f"config, {MIMICKED_VERSIONS[major]} (read here) "
                + ", ".join(f"{f}={out.get(f)!r}" for f in differ),
                VersionDependentWarning, stacklevel=5)
    if dropped:
        warnings.warn(f"{model_type}: its config class ignores "
                      + "; ".join(dropped), IgnoredKeyWarning, stacklevel=5)
    derive = DERIVED_FIELDS.get(model_type)
    return out if derive is None else derive(out, major)


def _raw_text_config(config: Mapping) -> tuple[dict, str | None]:
    """The mapping that holds the language model's fields, and the model_type
    (six positional fields named as its config class reads them:
    :func:`_class_names`; a per-layer-type ``rope_parameters`` without the
    entries that are not a layer's: :func:`_nested_strays`)."""
    text, model_type = _language_fields(config)
    return _nested_strays(text, model_type), model_type


def _language_fields(config: Mapping) -> tuple[dict, str | None]:
    """:func:`_raw_text_config` before :func:`_nested_strays`."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json), got "
                         f"{type(config).__name__}")
    model_type = config.get("model_type")
    model_type = MODEL_TYPE_ALIASES.get(model_type, model_type)
    text = config.get("text_config")
    if text is None:
        config = _class_names(dict(config), model_type)
    if text is None and model_type == "modernbert-decoder" and \
            config.get("global_rope_theta"):
        # ModernBertDecoderConfig maps rope_theta onto global_rope_theta, and
        # 4.57.6 builds both rotary modules (global_rotary_emb, local_rotary_emb)
        # from that one config: local_rope_theta is not read. With both keys,
        # global_rope_theta wins (__init__ assigns it after PretrainedConfig
        # has set the keyword rope_theta through the attribute_map)
        return {**config, "rope_theta": config["global_rope_theta"]}, model_type
    if text is None and model_type == "dbrx" and isinstance(config.get("attn_config"),
                                                            Mapping):
        # DbrxAttention: rope_theta and kv_n_heads live in attn_config
        attn = config["attn_config"]
        return {**config, "rope_theta": attn.get("rope_theta", 10000.0),
                "num_key_value_heads": attn.get("kv_n_heads", 1)}, model_type
    if text is None and model_type == "jetmoe":
        # JetMoeConfig.attribute_map = {"head_dim": "kv_channels"} (4.57.6 and
        # 5.24.0): the head size is kv_channels, default 128, not hidden_size /
        # num_attention_heads. With both keys head_dim wins: the class sets
        # kv_channels from its own argument, then the keyword head_dim through
        # the attribute_map (both releases' tiny models rotate and cache
        # head_dim features: results/config_forms-*.json, form head_dim:half)
        value = _alias_wins(config, "head_dim", "kv_channels", "JetMoeConfig")
        return {**config, "head_dim": 128 if value is None else value}, model_type
    if text is None and model_type == "glm4_moe_lite" and \
            config.get("head_dim") is not None:
        # Glm4MoeLiteConfig.attribute_map = {"head_dim": "qk_rope_head_dim"}
        # (5.24.0): the keyword head_dim sets the rotary part after the field,
        # and wins (its tiny model rotates and caches head_dim features)
        value = _alias_wins(config, "head_dim", "qk_rope_head_dim",
                            "Glm4MoeLiteConfig")
        return {**config, "qk_rope_head_dim": value, "head_dim": value}, model_type
    if text is None:
        if model_type == "lfm2" and config.get("theta") is not None:
            # Lfm2Config: rope_theta = kwargs.get("theta", rope_theta), the key
            # of Liquid's original configs, which wins over rope_theta
            return {**config, "rope_theta": config["theta"]}, model_type
        return dict(config), model_type
    if isinstance(text, Mapping) and isinstance(text.get("model_type"), str):
        model_type = text["model_type"].removesuffix("_text")  # qwen2_5_vl_text
    if not isinstance(text, Mapping):
        raise ValueError(f"text_config must be a mapping, got {type(text).__name__}")
    merged = dict(text)
    if isinstance(text.get("model_type"), str):
        merged = _class_names(merged, text["model_type"])
    for key in ("rope_theta", "rope_scaling", "rope_parameters", "hidden_size",
                "num_attention_heads", "head_dim", "max_position_embeddings",
                "partial_rotary_factor"):
        if key in config and key in text and config[key] != text[key]:
            raise ValueError(f"config is ambiguous: {key} is {config[key]!r} at the top "
                             f"level but {text[key]!r} in text_config")
    return merged, model_type


def is_per_layer_type(parameters) -> bool:
    """Whether a 5.x ``rope_parameters`` holds one dictionary per layer type
    (``{"full_attention": {...}, "sliding_attention": {...}}``); an entry may be
    None, a layer type without positions (``BeamConfig``)."""
    return (isinstance(parameters, Mapping)
            and any(isinstance(v, Mapping) for v in parameters.values())
            and all(v is None or isinstance(v, Mapping) for v in parameters.values()))


def _rope_block(config: Mapping) -> tuple[dict, str]:
    """The rope dictionary and which layout it came in."""
    scaling = config.get("rope_scaling")
    parameters = config.get("rope_parameters")
    if parameters is not None and scaling is not None:
        raise ValueError("config is ambiguous: it has both rope_scaling (transformers "
                         "4.x) and rope_parameters (5.x); keep one")
    if parameters is not None:
        if not isinstance(parameters, Mapping):
            raise ValueError(f"rope_parameters must be a mapping, got {parameters!r}")
        if is_per_layer_type(parameters):
            # 5.x, one dictionary per layer type: the model's global RoPE is the
            # full-attention layers' (rope_from_config(..., layer=i) reads the others)
            if "full_attention" not in parameters:
                raise ValueError(f"rope_parameters holds one dictionary per layer type "
                                 f"({sorted(parameters)}) and none for "
                                 f"full_attention; ask for a layer's with layer=i")
            parameters = parameters["full_attention"]
            if not isinstance(parameters, Mapping):
                raise ValueError(f"rope_parameters['full_attention'] must be a "
                                 f"mapping, got {parameters!r}")
        return dict(parameters), "5.x"
    if scaling is None:
        return {}, "none"
    if not isinstance(scaling, Mapping):
        raise ValueError(f"rope_scaling must be a mapping or null, got {scaling!r}")
    block = dict(scaling)
    return block, ("4.x type" if "type" in block and "rope_type" not in block
                   else "4.x rope_type")


#: Rope types of transformers 5.x only, read from the 5.x layout:
#: ``proportional`` (``_compute_proportional_rope_parameters``: the fastest
#: ``int(p·head_dim // 2)`` pairs of the whole head keep their frequencies,
#: the others get 0, all divided by ``factor``).
ROPE_KEYS_5X = {"proportional": ((), ("factor",))}


def _method(block: dict, model_type: str | None, layout: str = "") -> str:
    rope_type, old = block.pop("rope_type", None), block.pop("type", None)
    if rope_type is not None and old is not None and rope_type != old:
        raise ValueError(f"config is ambiguous: rope_type={rope_type!r} but "
                         f"type={old!r} (transformers 4.x copies type over rope_type)")
    name = old if old is not None else rope_type
    if name is None:
        name = "default"
    if name == "mrope":  # Qwen2-VL / Qwen2.5-VL configs: M-RoPE on default frequencies
        name = "default"
    if model_type == "phi3" and name in ("su", "yarn"):
        name = "longrope"  # Phi3Config._rope_scaling_adjustment (backward compatibility)
    if name in ROPE_KEYS_5X and layout == "5.x":
        return name
    if name not in ROPE_KEYS:
        raise ValueError(f"rope_type {name!r} is not one transformers 4.57 computes; "
                         f"it knows {sorted(ROPE_KEYS)}")
    return name


def _positive_length(name: str, value) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _validate.positive_int(name, value)


def _check_keys(rope_type: str, block: dict, problems: _Problems) -> None:
    """Transformers' ``_check_received_keys``: a missing required key is an error
    (its ``KeyError``); an unknown key is reported (its "Unrecognized keys"
    warning) and then ignored, as transformers ignores it."""
    required, optional = {**ROPE_KEYS, **ROPE_KEYS_5X}[rope_type]
    missing = [name for name in required if block.get(name) is None]
    if missing:
        problems.messages.append(f"rope_type {rope_type!r} needs {missing} "
                                 f"(transformers raises KeyError: missing required "
                                 f"keys)")
    unknown = sorted(set(block) - set(required) - set(optional) - set(IGNORED_ROPE_KEYS))
    if unknown:
        warnings.warn(f"unknown key(s) {unknown} for rope_type {rope_type!r} are "
                      f"ignored, as transformers ignores them (its validator, "
                      f"where the config class runs one, logs them as "
                      f"unrecognized); it reads {sorted(required + optional)}. A "
                      f"misspelt key means its default is used instead",
                      UnknownRopeKeyWarning, stacklevel=4)
        for name in unknown:
            del block[name]


def _head_dim(config: Mapping) -> int:
    head_dim = config.get("head_dim")
    rope_head = config.get("qk_rope_head_dim")  # DeepSeek-V2/V3 (MLA): rotary part only
    if rope_head is not None and config.get("model_type") not in HEAD_DIM_APART:
        if head_dim is not None and head_dim != rope_head:
            raise ValueError(f"config is ambiguous: head_dim={head_dim} but "
                             f"qk_rope_head_dim={rope_head} (DeepseekV3Config sets "
                             f"head_dim = qk_rope_head_dim)")
        return _validate.positive_int("qk_rope_head_dim", rope_head)
    if head_dim is not None:
        return _validate.positive_int("head_dim", head_dim)
    _, hidden = _one_of_aliases(config, _HIDDEN_ALIASES)
    _, heads = _one_of_aliases(config, _HEADS_ALIASES)
    if hidden is None or heads is None:
        missing = [n for n, v in (("hidden_size", hidden), ("num_attention_heads", heads))
                   if v is None]
        raise ValueError(f"config is incomplete: the head size needs head_dim, or "
                         f"hidden_size and num_attention_heads; missing {missing}")
    hidden = _validate.positive_int("hidden_size", hidden)
    heads = _validate.positive_int("num_attention_heads", heads)
    return hidden // heads


def _block_wins(values: dict, key: str, model_type: str | None):
    """``values[key]``, the rope block's, where only transformers 5.x registers
    ``model_type``: its ``standardize_rope_params`` and
    ``convert_rope_params_to_dict`` (5.24.0, ``modeling_rope_utils.py``) put a
    top-level value in with ``setdefault``, so the block's wins; ``None``
    elsewhere (4.57.6 reads the top level, and a file both read is refused)."""
    if key not in values or _only_release(model_type) != 5:
        return None
    ignored = {k: v for k, v in values.items() if k != key and v != values[key]}
    warnings.warn(f"{ignored} ignored: transformers 5.x, the only release with "
                  f"model_type {model_type!r}, keeps the {key} (its config class "
                  f"sets the top-level value with setdefault)", IgnoredKeyWarning,
                  stacklevel=6)
    return values[key]


def _partial_factor(config: Mapping, block: dict, layout: str,
                    model_type: str | None = None) -> float:
    found = {}
    for name, source in (("partial_rotary_factor", config), ("rotary_pct", config)):
        if source.get(name) is not None:
            found[name] = source[name]
    if layout == "5.x":
        if block.get("partial_rotary_factor") is not None:
            found["rope_parameters.partial_rotary_factor"] = block["partial_rotary_factor"]
        block.pop("partial_rotary_factor", None)
    values = {name: _validate.finite_float(name, v, greater_than=0.0)
              for name, v in found.items()}
    if len(set(values.values())) > 1:
        block_value = _block_wins(values, "rope_parameters.partial_rotary_factor",
                                  model_type)
        if block_value is None:
            raise ValueError(f"config is ambiguous: {values} disagree on the rotated "
                             f"share")
        values = {"rope_parameters.partial_rotary_factor": block_value}
    factor = next(iter(values.values()), 1.0)
    if factor > 1:
        raise ValueError(f"partial_rotary_factor must be <= 1, got {factor}")
    return factor


def _base(config: Mapping, block: dict, layout: str, model_type: str | None) -> float:
    if model_type in FIXED_BASE:  # the modelling code never reads a base field
        given = {k: v for k, v in (("rope_theta", config.get("rope_theta")),
                                   ("rope_parameters.rope_theta",
                                    block.get("rope_theta"))) if v is not None}
        block.pop("rope_theta", None)
        if any(v != FIXED_BASE[model_type] for v in given.values()):
            warnings.warn(f"{given} ignored: model_type {model_type!r} rotates with "
                          f"the fixed base {FIXED_BASE[model_type]:g} (its "
                          f"create_sinusoidal_positions reads no config field)",
                          IgnoredKeyWarning, stacklevel=5)
        return FIXED_BASE[model_type]
    found = {}
    if config.get("rope_theta") is not None:
        found["rope_theta"] = config["rope_theta"]
    if config.get("rotary_emb_base") is not None:  # GPT-NeoX
        found["rotary_emb_base"] = config["rotary_emb_base"]
    if layout == "5.x":
        if block.get("rope_theta") is not None:
            found["rope_parameters.rope_theta"] = block["rope_theta"]
        block.pop("rope_theta", None)
    values = {name: _validate.finite_float(name, v, greater_than=1.0)
              for name, v in found.items()}
    if len(set(values.values())) > 1:
        block_value = _block_wins(values, "rope_parameters.rope_theta", model_type)
        if block_value is None:
            raise ValueError(f"config is ambiguous: {values} disagree on the RoPE base")
        return block_value
    if values:
        return next(iter(values.values()))
    if model_type in FIXED_BASE:
        return FIXED_BASE[model_type]
    raise ValueError(f"config is incomplete: no rope_theta, and model_type "
                     f"{model_type!r} has no known default ({len(MODEL_DEFAULTS)} types "
                     f"have one: posenc_lib.config_reader.MODEL_DEFAULTS); add "
                     f"rope_theta (in rope_parameters for transformers 5.x) with the "
                     f"value the model was trained with")


#: Names config classes give ``max_position_embeddings`` (their
#: ``attribute_map``: GPT-J and CodeGen store it as ``n_positions``).
_LENGTH_ALIASES = ("max_position_embeddings", "n_positions")


def _max_length(config: Mapping) -> int | None:
    # with both keys, max_position_embeddings wins: PretrainedConfig sets the
    # keyword arguments it does not take after the class's own
    # (``n_positions``), through the attribute_map
    name = next((n for n in _LENGTH_ALIASES if config.get(n) is not None), None)
    return None if name is None else _positive_length(name, config[name])


def _optional_length(config: Mapping, name: str) -> int | None:
    value = config.get(name)
    return None if value is None else _positive_length(name, value)


def release_defaults(model_type: str | None,
                     transformers_version: str | None = None) -> dict:
    """The defaults ``model_type``'s config class fills in for the rotary
    fields, in the release ``transformers_version`` names (default: the
    installed one): ``MODEL_DEFAULTS``, with the values of
    :data:`MODEL_DEFAULTS_5_CHANGED` for a 5.x release.

    Raises:
        ValueError: for a ``transformers_version`` that is not a 4.x or 5.x
            release.
    """
    defaults = dict(MODEL_DEFAULTS.get(model_type, {}))
    changed = _defaults.MODEL_DEFAULTS_5_CHANGED.get(model_type)
    if changed and _reading_major(transformers_version) >= 5:
        defaults.update(changed)
    return defaults


def _warn_changed_defaults(used, model_type: str | None,
                           transformers_version: str | None) -> None:
    """A :class:`VersionDependentWarning` for each field in ``used`` whose
    class default differs between the releases, with both values."""
    changed = _defaults.MODEL_DEFAULTS_5_CHANGED.get(model_type, {})
    for name in used:
        if name in changed:
            major = _reading_major(transformers_version)
            warnings.warn(
                f"the config leaves out {name}: model_type {model_type!r}'s config "
                f"class fills in {MODEL_DEFAULTS[model_type][name]!r} in transformers "
                f"4.57 and {changed[name]!r} in 5.x; read as {major}.x does "
                f"(transformers_version= picks the release; give {name} to fix it)",
                VersionDependentWarning, stacklevel=4)


def _with_defaults(config: dict, block: dict, model_type: str | None,
                   used: list | None = None, defaults: Mapping | None = None) -> dict:
    """``config`` with its class's defaults for the fields it omits (their
    names appended to ``used``); ``defaults``: the release's (default:
    :data:`MODEL_DEFAULTS`, 4.57.6's)."""
    if model_type == "gpt_neox":  # GPTNeoXConfig overwrites these two after reading
        # (4.57.6 always; 5.24.0's convert_rope_params_to_dict only where the
        # value is not inside rope_parameters, which it reads first)
        config = dict(config)
        for kept, lost in (("rotary_pct", "partial_rotary_factor"),
                           ("rotary_emb_base", "rope_theta")):
            if config.get(lost) is None:
                continue
            if block.get(lost) is not None:  # 5.x: rope_parameters' value wins
                if config[lost] != block[lost]:
                    warnings.warn(f"{lost}={config[lost]!r} ignored: GPTNeoXConfig "
                                  f"(5.x) reads rope_parameters' {block[lost]!r}",
                                  IgnoredKeyWarning, stacklevel=5)
                config.pop(lost)
                continue
            value = config.get(kept)
            value = MODEL_DEFAULTS["gpt_neox"][kept] if value is None else value
            if config[lost] != value:  # equal: a config GPTNeoXConfig saved
                warnings.warn(f"{lost}={config[lost]!r} ignored: GPTNeoXConfig "
                              f"(transformers 4.57 and 5.x) replaces it by {kept}="
                              f"{value!r}" + ("" if kept in config else
                                              " (its default)")
                              + f"; give {kept} to change it", IgnoredKeyWarning,
                              stacklevel=5)
            config.pop(lost)
    filled = dict(config)
    if defaults is None:
        defaults = MODEL_DEFAULTS.get(model_type, {})
    for name, value in defaults.items():
        if name == "rope_scaling":  # filled in by parse_rope_config
            continue
        names = _SAME_FIELD[name]
        if all(config.get(n) is None and block.get(n) is None for n in names):
            filled[name] = value
            if used is not None:
                used.append(name)
    return filled


def warn_defaults(used, defaults: Mapping, model_type, *, stacklevel: int) -> None:
    """Warn that the fields ``used`` were filled from ``defaults``, the values
    of ``model_type``'s config class (nothing if ``used`` is empty);
    ``stacklevel`` counts from this function's frame."""
    if used:
        names = sorted(set(used), key=list(used).index)
        values = {name: defaults[name] for name in names}
        warnings.warn(f"the config leaves out {names}; using the defaults of "
                      f"model_type {model_type!r}'s config class ({values}), as "
                      f"transformers does", DefaultValueWarning,
                      stacklevel=stacklevel)


def _check_values(block: dict, problems: _Problems) -> None:
    """The values of the rope block that transformers' formulas need to be
    numbers in range (each problem recorded, none raised)."""
    # factor < 1 and attention_factor = 0 are computed (transformers 4.57 logs a
    # warning and computes them; rope_parameters warns)
    ranges = {"factor": {"greater_than": 0.0}, "alpha": {"at_least": 1.0},
              "low_freq_factor": {"greater_than": 0.0},
              "high_freq_factor": {"greater_than": 0.0},
              "beta_fast": {"greater_than": 0.0}, "beta_slow": {"greater_than": 0.0},
              "attention_factor": {"at_least": 0.0},
              "mscale": {"at_least": 0.0}, "mscale_all_dim": {"at_least": 0.0}}
    for name, value in block.items():
        if value is None or name not in ranges:
            continue
        if name in ("beta_fast", "beta_slow", "alpha") and value == 0:
            continue  # transformers reads `get(name) or default` / a falsy alpha
        problems.check(_validate.finite_float, name, value, **ranges[name])
    if "truncate" in block and not isinstance(block["truncate"], bool):
        problems.messages.append(f"truncate must be true or false, got "
                                 f"{block['truncate']!r}")


def _same_original(top: int | None, block: int | None) -> None:
    if top is not None and block is not None and top != block:
        raise ValueError(f"config is ambiguous: original_max_position_embeddings is "
                         f"{top} at the top level but {block} in the rope block")


#: Config classes that fill in ``per_layer_config`` when ``config.json`` has
#: none (``Gemma4TextConfig`` and ``Gemma4UnifiedTextConfig.__post_init__``,
#: transformers 5.24.0): every full-attention layer gets ``head_dim =
#: global_head_dim`` (default 512) and, with ``attention_k_eq_v``,
#: ``num_key_value_heads = num_global_key_value_heads``.
PER_LAYER_DEFAULT_TYPES = ("gemma4", "gemma4_unified")


def gemma4_layer_types(n: int) -> list[str]:
    """Gemma4TextConfig's default layer types: every 6th layer and the last
    one full attention, the others sliding."""
    kinds = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
             for i in range(n)]
    if kinds:
        kinds[-1] = "full_attention"  # the class forces it (and logs a warning)
    return kinds


def _layer_types_here(text: Mapping, model_type: str | None) -> list | None:
    given = text.get("layer_types")
    if given is not None:
        return list(given)
    if (model_type or "").removesuffix("_text") in PER_LAYER_DEFAULT_TYPES:
        n = num_layers(text) or text.get("num_hidden_layers") or \
            _defaults.LAYER_DEFAULTS["gemma4"]["num_hidden_layers"]
        return gemma4_layer_types(_validate.positive_int("num_hidden_layers", n))
    return None


def layer_overrides(text: Mapping, model_type: str | None) -> dict[int, dict]:
    """A 5.x heterogeneous config's per-layer overrides, ``{layer index: {field:
    value}}``: ``per_layer_config`` as stated (keys are layer indices, ``"05"``
    or ``5``), or what the class fills in without it
    (``PER_LAYER_DEFAULT_TYPES``); ``{}`` for any other config.

    Raises:
        ValueError: naming ``per_layer_config`` when it is not a mapping of
            layer indices to mappings.
    """
    raw = text.get("per_layer_config")
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise ValueError(f"per_layer_config must be a mapping of layer indices "
                             f"to field overrides, got {raw!r}")
        out = {}
        for key, value in raw.items():
            try:
                index = int(key)
            except (TypeError, ValueError):
                raise ValueError(f"per_layer_config keys must be layer indices, got "
                                 f"{key!r}") from None
            if not isinstance(value, Mapping):
                raise ValueError(f"per_layer_config[{key!r}] must be a mapping of "
                                 f"fields, got {value!r}")
            out[index] = dict(value)
        return out
    if (model_type or "").removesuffix("_text") not in PER_LAYER_DEFAULT_TYPES:
        return {}
    override = {"head_dim": text.get("global_head_dim", 512)}
    if text.get("attention_k_eq_v") and text.get("num_global_key_value_heads") is not None:
        override["num_key_value_heads"] = text["num_global_key_value_heads"]
    kinds = _layer_types_here(text, model_type) or []
    return {i: dict(override) for i, kind in enumerate(kinds) if kind == "full_attention"}


def _full_attention_overrides(text: dict, model_type: str | None) -> dict:
    """``text`` with the overrides its full-attention layers share merged in:
    transformers builds the full-attention rotary module from
    ``per_layer_config["full_attention"]`` (Gemma4TextRotaryEmbedding), so the
    global RoPE has their head size. Unchanged when there are no overrides or
    the full-attention layers differ (ask per layer then)."""
    overrides = layer_overrides(text, model_type)
    if not overrides:
        return text
    kinds = _layer_types_here(text, model_type) or []
    full = [overrides.get(i, {}) for i, kind in enumerate(kinds) if kind == "full_attention"]
    if not full or any(f != full[0] for f in full):
        return text
    return {**text, **full[0], "per_layer_config": {}}


def parse_rope_config(config: Mapping, *,
                      transformers_version: str | None = None) -> RopeConfig:
    """Read the rotary set-up of a ``config.json`` mapping (see the module docstring).

    ``transformers_version`` (default: the installed transformers; 4.57.6's
    reading when none is installed) matters only where the two releases' code,
    not the config, differs: a ``partial_rotary_factor`` below 1 with the plain
    RoPE of a class that rotates the whole head in 5.x
    (``DEFAULT_ROPE_WHOLE_HEAD_5``), and a field the config leaves out whose
    class default changed in 5.x (Cohere's, Falcon-H1's, OLMo 3's and Persimmon's
    ``rope_theta``; :func:`release_defaults`), each read as that release reads
    it, with a :class:`VersionDependentWarning`.

    Raises:
        ValueError: for a model without rotary positions, a missing key, a
            ``transformers_version`` that is not a 4.x or 5.x release, or a
            config that transformers 4.57 and 5.x would read differently
            whatever release runs it (one field against another).

    Warns:
        UnknownRopeKeyWarning: for a key of the rope block that transformers
            does not read; the key is ignored, as transformers ignores it.
    """
    with reading_release(transformers_version):
        if transformers_version is not None:
            _reading_major(transformers_version)  # a ValueError for a bad version
        text, model_type = _text_config(config)
        if model_type in NOT_ROTARY:
            raise ValueError(f"model_type {model_type!r} uses {NOT_ROTARY[model_type]}, not "
                             f"rotary embeddings: there are no RoPE frequencies to compute")
        if _granite_nope(text, model_type):
            raise ValueError(
                f"position_embedding_type is {text.get('position_embedding_type')!r}, not "
                f"'rope': GraniteMoeHybridModel builds no rotary embedding (no positional "
                f"encoding at all); there are no RoPE frequencies to compute")
        if text.get("alibi") or (isinstance(text.get("attn_config"), Mapping)
                                 and text["attn_config"].get("alibi")):
            raise ValueError("config uses ALiBi (alibi=true), not rotary embeddings: there "
                             "are no RoPE frequencies to compute")
        if _fills_per_type_rope(_raw_text_config(config)[0], model_type):
            warn_defaults(["rope_parameters"], {"rope_parameters": PER_TYPE_ROPE_DEFAULTS[
                (model_type or "").removesuffix("_text")]}, model_type, stacklevel=3)
        text = _legacy_keys_dropped(text, model_type)
        text = _full_attention_overrides(text, model_type)
        defaults = release_defaults(model_type, transformers_version)
        scaled_default = defaults.get("rope_scaling")
        scaled_used = (scaled_default is not None
                       and not {"rope_scaling", "rope_parameters"} & set(text))
        if scaled_used:
            # the class's default rope_scaling is a scaled one (Apertus, gpt-oss): a
            # config without the key gets it; an explicit null keeps it off
            text = {**text, "rope_scaling": dict(scaled_default)}
        block, layout = _rope_block(text)
        if model_type == "phi3" and layout.startswith("4.x") and \
                set(block) != {"type", "short_factor", "long_factor"}:
            raise ValueError(f"Phi3Config (transformers 4.57) accepts rope_scaling with "
                             f"exactly the keys type, short_factor and long_factor, got "
                             f"{sorted(block)}")
        used: list = ["rope_scaling"] if scaled_used else []
        text = _with_defaults(text, block if layout == "5.x" else {}, model_type, used,
                              defaults)
        # A default share of 1.0 is also the generic fallback: nothing to report.
        used = [n for n in used if defaults[n] != 1.0]
        warn_defaults(used, defaults, model_type, stacklevel=4)
        _warn_changed_defaults(used, model_type, transformers_version)
        # Independent checks: every problem is collected, then one error lists them.
        problems = _Problems()
        base = problems.check(_base, text, block, layout, model_type)
        partial = problems.check(_partial_factor, text, block, layout, model_type)
        rope_type = problems.check(_method, block, model_type, layout)
        mrope = block.get("mrope_section")
        alpha = None
        if rope_type == "dynamic" and model_type in NTK_ALPHA_MODELS:
            # HunYuan*RotaryEmbedding: `rope_type == "dynamic" and rope_scaling["alpha"]`
            # (a KeyError without the key); its config class validates nothing.
            if "alpha" not in block:
                problems.messages.append(f"model_type {model_type!r} with rope_type "
                                         f"'dynamic' needs alpha (its rotary module reads "
                                         f"rope_scaling['alpha'])")
            alpha = block.pop("alpha", None) or None
            block = {k: v for k, v in block.items() if k in ("factor",)}
        if rope_type is not None and alpha is None:
            _check_keys(rope_type, block, problems)
        _check_values({**block, "alpha": alpha}, problems)
        head_dim = problems.check(_head_dim, text)
        if alpha is not None and text.get("head_dim") is None:
            problems.messages.append(f"model_type {model_type!r} with an NTK alpha needs "
                                     f"head_dim (its rotary module reads config.head_dim)")
        rotary_dim = text.get("rotary_dim")  # GPT-J, CodeGen (4.x); MiniMax-M2
        if rotary_dim is not None and head_dim is not None and partial is not None:
            # GPTJAttention rotates the first rotary_dim features; MiniMaxM2Config
            # (5.x) turns it into partial_rotary_factor = rotary_dim / head_dim
            rotary_dim = problems.check(_validate.positive_int, "rotary_dim", rotary_dim)
            if rotary_dim is not None and rotary_dim > head_dim:
                problems.messages.append(f"rotary_dim {rotary_dim} exceeds head_dim "
                                         f"{head_dim}")
            elif rotary_dim is not None:
                if partial != 1.0 and partial != rotary_dim / head_dim:
                    problems.messages.append(
                        f"config is ambiguous: rotary_dim {rotary_dim} of head_dim "
                        f"{head_dim} but partial_rotary_factor {partial}")
                partial = rotary_dim / head_dim
        if rope_type == "default" and head_dim is not None and partial is not None \
                and partial != 1.0 and (model_type or "").removesuffix("_text") in \
                _WHOLE_HEAD_5_NAMES:
            partial = _default_share(partial, head_dim, model_type, transformers_version)
        if head_dim is not None and partial is not None:
            dim = int(head_dim * partial)
            if dim < 2 or dim % 2:
                problems.messages.append(
                    f"the rotary dim int(head_dim * partial_rotary_factor) = "
                    f"int({head_dim} * {partial}) = {dim} must be even and >= 2")
        max_len = problems.check(_max_length, text)
        top_original = problems.check(_optional_length, text,
                                      "original_max_position_embeddings")
        block_original = block.get("original_max_position_embeddings")
        if block_original is not None:
            block_original = problems.check(_positive_length,
                                            "original_max_position_embeddings",
                                            block_original)
        problems.raise_if_any()
        params = {k: v for k, v in block.items()
                  if k not in IGNORED_ROPE_KEYS and k != "original_max_position_embeddings"}
        original = factor = None
        if "factor" in params and params["factor"] is not None:
            factor = _validate.finite_float("factor", params["factor"], greater_than=0.0)
        dynamic_params = None
        if rope_type == "proportional":  # the whole head, p kept as a parameter
            params["partial_rotary_factor"] = partial
            dim = head_dim
        if alpha is not None:
            dim, rope_type = head_dim, "ntk"  # base · alpha^(d/(d-2)), d = head_dim
            dynamic_params = ({"factor": factor, "max_position_embeddings": max_len}
                              if factor is not None and max_len is not None else None)
            params, factor = {"factor": alpha}, None

        # a type only one release registers is read as that one reads it: the
        # refusals below stand where 4.57.6 and 5.24.0 read one file differently
        five = layout == "5.x" or _only_release(model_type) == 5
        if rope_type == "dynamic":
            if max_len is None:
                raise ValueError("config is incomplete: rope_type 'dynamic' needs "
                                 "max_position_embeddings (the length beyond which the "
                                 "base grows)")
            params["max_position_embeddings"] = max_len
            params["original_max_position_embeddings"] = block_original  # accepted, unused
            original = max_len
        elif rope_type == "yarn":
            if five:  # standardize_rope_params: a top-level value has priority
                _same_original(top_original, block_original)
                original = top_original or block_original or max_len
            else:  # 4.57: the rope block's value if truthy, else max_position_embeddings
                original = block_original or max_len
                if top_original is not None and top_original != original:
                    raise ValueError(f"config is ambiguous: a top-level "
                                     f"original_max_position_embeddings={top_original} is "
                                     f"ignored by transformers 4.57 (which uses {original}) "
                                     f"but takes priority in 5.x")
            if original is None:
                raise ValueError("config is incomplete: rope_type 'yarn' needs "
                                 "original_max_position_embeddings (in the rope block) or "
                                 "max_position_embeddings")
            if "truncate" in params and params["truncate"] is None:
                raise ValueError("truncate must be true or false, got null")
            for name in ("beta_fast", "beta_slow"):  # `get(name) or default`
                if name in params and not params[name]:
                    params[name] = None
            params["original_max_position_embeddings"] = original
        elif rope_type == "longrope":
            if max_len is None:
                raise ValueError("config is incomplete: rope_type 'longrope' needs "
                                 "max_position_embeddings")
            if model_type == "phi3" and top_original is None and layout != "5.x":
                raise ValueError("config is incomplete: Phi-3 configs need a top-level "
                                 "original_max_position_embeddings (Phi3Config would "
                                 "silently default it to 4096)")
            _same_original(top_original, block_original)
            if five:  # factor as given, else max_position_embeddings / original
                original = top_original or block_original or max_len
                if factor is None:
                    factor = max_len / original
            elif top_original is not None:  # Phi-3: 4.57 derives factor from the lengths
                original, ratio = top_original, max_len / top_original
                if factor is not None and not math.isclose(factor, ratio):
                    raise ValueError(f"config is ambiguous: factor={factor} but "
                                     f"max_position_embeddings / original_max_position_"
                                     f"embeddings = {ratio:g}; transformers 4.57 uses the "
                                     f"ratio, 5.x the factor")
                factor = ratio
            else:
                original = max_len
                if block_original is not None and block_original != max_len:
                    raise ValueError(f"config is ambiguous: transformers 4.57 ignores the "
                                     f"rope block's original_max_position_embeddings="
                                     f"{block_original} and uses max_position_embeddings="
                                     f"{max_len}; 5.x uses {block_original}. Set one "
                                     f"top-level original_max_position_embeddings")
            params["factor"] = factor
            params["original_max_position_embeddings"] = original
        elif rope_type == "llama3":
            original = block_original
            params["original_max_position_embeddings"] = original
        if mrope is not None:
            mrope = tuple(_validate.nonnegative_int(f"mrope_section[{i}]", s)
                          for i, s in enumerate(mrope))
        return RopeConfig(rope_type=rope_type, dim=dim, head_dim=head_dim,
                          partial_rotary_factor=partial, base=base, params=params,
                          max_position_embeddings=max_len,
                          original_max_position_embeddings=original, factor=factor,
                          mrope_section=mrope, layout=layout, model_type=model_type,
                          ntk_alpha=alpha, dynamic_params=dynamic_params,
                          defaults_used=tuple(used))


#: Older names of rotary fields and the model types whose config class reads
#: them (``configuration_gpt_neox.py``, ``configuration_gpt_neox_japanese.py``,
#: ``configuration_gptj.py``, ``configuration_codegen.py`` in transformers
#: 4.57.6 and 5.24.0; ``configuration_minimax_m2.py`` in 5.24.0). Every other
#: class keeps such a key as an attribute that nothing reads (5.24.0's
#: ``MiniMaxM3VLTextConfig`` declares ``rotary_dim`` but its rotary module
#: reads only ``partial_rotary_factor``): ``_legacy_keys_dropped`` drops it.
LEGACY_ROTARY_KEYS = {"rotary_pct": ("gpt_neox", "gpt_neox_japanese"),
                      "rotary_emb_base": ("gpt_neox", "gpt_neox_japanese"),
                      "rotary_dim": ("gptj", "codegen", "minimax_m2")}


#: Model types whose attention has one key and value head per query head and
#: whose config class has no ``num_key_value_heads`` (nor reads one): a
#: ``num_key_value_heads`` in their config changes nothing (the modelling
#: files of transformers 4.57.6 and 5.24.0 never name it).
MHA_ONLY = ("codegen", "gptj", "gpt_neox", "gpt_neox_japanese", "persimmon", "roformer",
            "modernbert-decoder")


class IgnoredKeyWarning(UserWarning):
    """A top-level key that names a rotary field in other model families and
    that this model type's config class does not read (nor does transformers)."""


class VersionDependentWarning(UserWarning):
    """A config that transformers 4.57.6 and 5.24.0 turn into different
    frequencies through code, not through any field the config could change:
    the library reads it as the requested release does (``transformers_version``,
    default the installed one) and the warning gives the other reading."""


#: Text model types whose rotary module in transformers 5.24.0 computes the
#: plain (``"default"``) RoPE over the whole ``head_dim``, in the class's own
#: ``compute_default_rope_parameters``, which reads no ``partial_rotary_factor``
#: (``models/llama/modeling_llama.py`` and the classes copied from it), while
#: 4.57.6's ``_compute_default_rope_parameters`` (``modeling_rope_utils.py``)
#: rotates ``int(head_dim * partial_rotary_factor)`` features. The scaled types
#: read the factor in both releases. Of these classes, those 4.57.6 has build
#: a model whose attention fails at the first forward pass (a ``cos`` narrower
#: than the head it multiplies). ``scripts/partial_readers.py`` measures
#: every rotary class of each release (``results/partial-readers-4.json``,
#: ``-5.json``); ``tests/test_partial_readers.py`` compares this set with them.
DEFAULT_ROPE_WHOLE_HEAD_5 = frozenset({
    "afmoe", "arcee", "aria_text", "axk1", "axk2", "bailing_hybrid", "beam",
    "bitnet", "cohere", "cohere2", "cohere2_moe", "cohere_compass_text",
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "diffllama", "doge", "dory",
    "dots1", "emu3_text_model",
    "ernie4_5", "ernie4_5_moe", "exaone", "exaone4", "exaone_moe", "falcon",
    "falcon_h1", "flex_olmo", "flint", "gemma", "gemma2",
    "gemma3_text", "gemma3n_text", "gemma4_text", "gemma4_unified_text",
    "glm_moe_dsa", "granite", "granite_swa", "granitemoe", "granitemoe_swa",
    "granitemoeshared", "helium", "hrm_text", "hunyuan_v1_dense",
    "hunyuan_v1_moe", "hy_v3", "hy_v4", "hyperclovax", "internlm3",
    "iquestcoder", "jais2", "jetmoe", "kolibri1", "lara_mini", "lfm2", "lfm2_moe",
    "lfm3", "llama", "llama4_text", "longcat_flash", "minicpm3", "minimax",
    "ministral", "mistral", "mixtral", "mllama_text_model",
    "modernbert-decoder", "moshi", "nanochat", "olmo", "olmo2",
    "olmo3", "olmo_hybrid", "olmoe", "phimoe", "qwen2", "qwen2_moe", "qwen3",
    "qwen3_moe", "sarvam_mla", "seed_oss", "smollm3", "starcoder2",
    "vaultgemma", "youtu"})


_WHOLE_HEAD_5_NAMES = frozenset(t.removesuffix("_text") for t in DEFAULT_ROPE_WHOLE_HEAD_5)


def _reading_major(transformers_version: str | None) -> int:
    """4 or 5: the release whose reading to reproduce (see
    ``serving.mimicked_transformers_version``, whose errors it raises)."""
    from ._versions import mimicked_transformers_version

    return int(mimicked_transformers_version(transformers_version).split(".")[0])


def _default_share(partial: float, head_dim: int, model_type: str | None,
                   transformers_version: str | None) -> float:
    """The rotated share of a plain RoPE whose class rotates the whole head in
    5.x (:data:`DEFAULT_ROPE_WHOLE_HEAD_5`), as the requested release reads it,
    with a :class:`VersionDependentWarning` that gives both readings."""
    major = _reading_major(transformers_version)
    warnings.warn(
        f"partial_rotary_factor {partial} with the plain RoPE of model_type "
        f"{model_type!r}: transformers 4.57 builds frequencies for int({head_dim} "
        f"* {partial}) = {int(head_dim * partial)} features of each head (and its "
        f"attention then fails on all {head_dim}), transformers 5.x rotates all "
        f"{head_dim} (its default RoPE reads no partial_rotary_factor); read as "
        f"{major}.x does (transformers_version= picks the release)",
        VersionDependentWarning, stacklevel=4)
    return 1.0 if major >= 5 else partial


#: Model types whose attention builds its rotary module over the whole
#: ``head_dim`` (``XRotaryEmbedding(self.head_dim, ...)``, no
#: ``ROPE_INIT_FUNCTIONS``): a ``partial_rotary_factor`` is never read
#: (transformers 4.57.6: ``models/chameleon/modeling_chameleon.py`` lines
#: 287-293, ``models/dbrx/modeling_dbrx.py`` 236-240,
#: ``models/deprecated/open_llama/modeling_open_llama.py`` 241-247; RoFormer's
#: sinusoidal table is built over ``hidden_size // num_attention_heads``).
PARTIAL_UNREAD = ("chameleon", "dbrx", "open-llama", "roformer")


def _legacy_keys_dropped(text: dict, model_type: str | None) -> dict:
    """``text`` without the keys of :data:`LEGACY_ROTARY_KEYS` its model type
    does not read, nor ``partial_rotary_factor`` for :data:`PARTIAL_UNREAD`
    (each dropped key named in one :class:`IgnoredKeyWarning`)."""
    name = (model_type or "").removesuffix("_text")
    unread = sorted(k for k, types in LEGACY_ROTARY_KEYS.items()
                    if text.get(k) is not None and name not in types)
    params = text.get("rope_parameters")
    in_block = isinstance(params, Mapping) and \
        params.get("partial_rotary_factor") is not None
    if name in PARTIAL_UNREAD and (text.get("partial_rotary_factor") is not None
                                   or in_block):
        text = {k: v for k, v in text.items() if k != "partial_rotary_factor"}
        if in_block:  # 5.x: its rotary module is built over head_dim all the same
            text["rope_parameters"] = {k: v for k, v in params.items()
                                       if k != "partial_rotary_factor"}
        warnings.warn(f"partial_rotary_factor ignored: model_type {model_type!r} "
                      f"rotates the whole head_dim (its rotary module is built over "
                      f"head_dim and reads no share)", IgnoredKeyWarning, stacklevel=4)
    if name in FIXED_BASE:  # a table built from the base alone: no method read
        scaled = {k: text[k] for k in ("rope_scaling", "rope_parameters")
                  if isinstance(text.get(k), Mapping)
                  and (text[k].get("rope_type") or text[k].get("type")
                       or "default") != "default"}
        if scaled:
            text = {k: v for k, v in text.items() if k not in scaled}
            warnings.warn(f"{scaled} ignored: model_type {model_type!r} looks its "
                          f"angles up in a sinusoidal table built from the base "
                          f"alone; its code reads no rope scaling", IgnoredKeyWarning,
                          stacklevel=4)
    if not unread:
        return text
    readers = {k: list(LEGACY_ROTARY_KEYS[k]) for k in unread}
    warnings.warn(f"{unread} ignored: model_type {model_type!r}'s config class does "
                  f"not read them, and neither does transformers (only {readers} "
                  f"do); use partial_rotary_factor and rope_theta", IgnoredKeyWarning,
                  stacklevel=4)
    return {k: v for k, v in text.items() if k not in unread}


def _granite_nope(text: Mapping, model_type) -> bool:
    """GraniteMoeHybridModel builds its rotary module only when
    ``position_embedding_type == "rope"`` (the class default is None)."""
    return model_type == "granitemoehybrid" and \
        text.get("position_embedding_type") != "rope"


def positional_scheme(config: Mapping) -> str:
    """``"rotary"``, or what a non-rotary model uses (``"ALiBi"``, ...)."""
    text, model_type = _text_config(config)
    if model_type in NOT_ROTARY:
        return NOT_ROTARY[model_type]
    if _granite_nope(text, model_type):
        return "no positional encoding (NoPE)"
    if model_type == "zamba2" and not text.get("use_mem_rope", False):
        return "no positional encoding (NoPE)"  # Zamba2Attention: use_mem_rope
    if text.get("alibi") or (isinstance(text.get("attn_config"), Mapping)
                             and text["attn_config"].get("alibi")):
        return "ALiBi"
    return "rotary"
