"""The fields of a ``config.json`` that fix the model's layout, checked in one place.

:func:`validate_config` runs before anything reads a config (it is called by
``posenc_lib.config_reader._text_config``, which every reader goes through:
:func:`posenc_lib.scaling.rope_from_config`, :mod:`posenc_lib.per_layer`,
:mod:`posenc_lib.serving` and the inspector). Each problem is reported as a
``ValueError`` whose message starts with the field's name and says what to
write instead, so that a wrongly typed or out-of-range field never reaches the
arithmetic (where it would raise a ``TypeError`` or ``OverflowError`` from deep
inside, or give a silently wrong answer).

It sits in the base layer, below its users, and imports only
``posenc_lib._validate`` and ``posenc_lib._defaults`` (the config classes'
defaults, which tell an explicit null from a missing key); the reader, the
per-layer code, scaling and serving import it, never the other way round.
Checks that need the numerics' code live with that code: transformers' YaRN
length warning, which runs :func:`posenc_lib.serving.transformers_warnings`,
is :func:`posenc_lib.scaling.warn_yarn_lengths`, called by
:func:`~posenc_lib.scaling.rope_from_config`.

What is checked, and whose behaviour it follows (transformers 4.57.6 unless
stated):

* ``model_type`` (also ``text_config.model_type``) is a string.
* ``sliding_window`` and ``attention_chunk_size`` are positive integers or
  null (``true``/``false`` and strings are refused: the window is a number of
  tokens).
* ``layer_types`` has one entry per layer where ``num_hidden_layers`` is
  given (transformers' ``layer_type_validation``), each a string that
  transformers allows
  (``ALLOWED_LAYER_TYPES`` of ``configuration_utils``, read from the installed
  transformers when an entry is not in 4.57.6's set; both 4.57.6 and 5.x raise
  for any other entry), plus the types of the two classes that keep their own
  (LFM2's ``conv``; Granite 4.0's ``mamba`` and ``attention``, which its class
  requires).
* ``num_attention_heads`` and ``num_key_value_heads`` are positive integers,
  and the key/value heads divide the query heads (``repeat_kv`` gives each key
  head ``heads // kv_heads`` query heads; otherwise the attention's forward
  fails on mismatched shapes).
* ``hidden_size`` is a multiple of ``num_attention_heads`` for the model types
  whose 5.x config class requires it (:data:`HIDDEN_DIVISIBLE_5X`); 4.57.6
  accepts it and floors ``hidden_size // heads``, so the two versions differ and
  the config is refused, as every other config they read differently is.
* ``rope_local_base_freq`` (Gemma 3's sliding layers) is a finite number
  above 1, under its own name; an explicit null ``rope_theta`` or
  ``rope_local_base_freq`` is refused where the class has a default (the
  class keeps the null, and only a missing key gets the default).
* layers, heads and the head size are at most :data:`MAX_COUNT`.
* every length (``max_position_embeddings``, ``original_max_position_embeddings``
  at the top and in the rope block, the windows) is at most
  :data:`posenc_lib._validate.MAX_LENGTH` = 2**53, the largest integer float64
  holds exactly (``torch.arange`` and the angle arithmetic take positions as
  float64).
* a 4.x ``rope_scaling`` names its method: ``rope_type`` (or the older ``type``)
  present and not null. transformers 4.57.6 raises for one without it (the
  validator's ``KeyError``: missing required key ``rope_type``; where the class
  runs no validator, the rotary module's ``ROPE_INIT_FUNCTIONS[None]``), so a
  misspelt ``rope_tpye`` or an empty ``{}`` is an error, not plain RoPE.
  (5.x's ``standardize_rope_params`` defaults a missing one to ``"default"``:
  a 5.x ``rope_parameters`` without ``rope_type`` is read that way.)
"""

from __future__ import annotations

import numbers
from typing import Mapping

from . import _validate
from ._defaults import LAYER_DEFAULTS, MODEL_DEFAULTS

__all__ = ["validate_config", "allowed_layer_types", "ALLOWED_LAYER_TYPES_4_57",
           "KV_HEADS_DEFAULTS", "MODEL_LAYER_TYPES", "HIDDEN_DIVISIBLE_5X"]

#: ``ALLOWED_LAYER_TYPES`` of transformers 4.57.6 (``configuration_utils.py``),
#: used where transformers is not installed.
ALLOWED_LAYER_TYPES_4_57 = ("full_attention", "sliding_attention", "chunked_attention",
                            "linear_attention")
#: Classes whose layer types are their own (transformers 4.57.6):
#: ``Lfm2Config`` fills in ``conv`` (it runs no ``layer_type_validation``);
#: ``GraniteMoeHybridConfig`` raises unless every entry is ``mamba`` or
#: ``attention``.
MODEL_LAYER_TYPES = {"lfm2": ("full_attention", "conv"),
                     "granitemoehybrid": ("mamba", "attention")}
#: ``ALLOWED_LAYER_TYPES`` of transformers 5.24.0 (``configuration_utils.py``):
#: a 5.x config.json may hold these, and 5.24 builds such models (for example
#: ``indexed_attention`` in DeepSeek-V3.2, ``conv`` in LFM 3; see
#: ``results/conformance-5.json``). They are accepted, as 5.24 accepts them;
#: the layers are read as attention layers, and what the library does not
#: model about them (an indexer's keys, compressed caches) is listed per model
#: type in the stored conformance sweep.
ALLOWED_LAYER_TYPES_5_24 = (
    "full_attention", "sliding_attention", "chunked_attention", "window_attention",
    "indexed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "minimax_m3_sparse", "conv", "moe", "hybrid", "hybrid_sliding",
    "reference_sliding_attention", "linear_attention", "sparse", "dense")
#: Classes whose 5.24 layer types differ from their 4.57.6 ones
#: (``GraniteMoeHybridConfig`` in 5.24 fills in ``linear_attention`` for its
#: Mamba layers).
MODEL_LAYER_TYPES_5_24 = {"granitemoehybrid": ("linear_attention", "full_attention")}
#: Entries a 5.x class accepts in ``layer_types`` only because it removes them
#: before validating: ``DoryConfig.to_dict`` writes an ``"mlp"`` after each
#: layer's attention type (its MLP half), and ``__post_init__`` drops every
#: other entry and halves the layer counts (5.24.0
#: ``models/dory/configuration_dory.py``).
SAVED_FORM_LAYER_TYPES = {"dory": ("mlp",)}
#: The layer types posenc_lib knows how to treat (:mod:`posenc_lib.per_layer`).
KNOWN_LAYER_TYPES = ALLOWED_LAYER_TYPES_4_57 + ("conv", "mamba", "attention")
#: Model types whose transformers 5.x (5.24.0) config class raises unless
#: ``hidden_size % num_attention_heads == 0`` (``validate_architecture`` in
#: ``models/*/configuration_*.py``; the decoder models among them).
#: ``tests/test_bad_input.py`` rebuilds the set from 5.24's source where that
#: environment exists.
HIDDEN_DIVISIBLE_5X = frozenset({
    "arcee", "aria_text", "cwm", "deepseek_v2", "exaone", "gemma2", "gemma3",
    "gemma3_text", "gemma3n", "gemma3n_text", "gpt_neox", "hyperclovax", "internlm3",
    "jais2", "llama", "minicpm3", "vaultgemma"})


#: The most layers, heads and features per head a config may state: 65,536,
#: 500 times the deepest published decoder (Llama 3.1 405B, 126 layers) and
#: 128 times the widest head (512). The report lists every layer and computes
#: one frequency per pair; far beyond this, a mistyped number (10**9 layers, a
#: head of 2**40 features) would run for hours or exhaust memory instead of
#: failing.
MAX_COUNT = 2**16


#: ``num_key_value_heads`` as a config class fills it in when the config omits
#: it and its default is not "the same as num_attention_heads" (transformers
#: 4.57.6, the ``__init__`` defaults; ``tests/test_bad_input.py`` checks each).
#: A default that does not divide the config's heads fails the attention's
#: forward. Not enforced here (reading the rotary set-up needs no key heads);
#: ``tests/helpers/config_population.py`` uses it to recognise that difference, and
#: ``serving.cache_head`` sizes the cache with it when the config omits the field.
#: Every 4.57.6 class whose ``__init__`` gives an integer default is listed
#: (``tests/test_bad_input.py`` reads them all from transformers); composite
#: classes are listed by their text model's default. (DeepSeek-V3's attention
#: expands its keys per query head and is left out.) So is every class that
#: only transformers 5.x registers, at 5.24.0, but those with MLA's
#: ``kv_lora_rank`` (``tests/test_class_defaults.py``, from the stored registry).
KV_HEADS_DEFAULTS = {
    "bamba": 8, "bitnet": 5, "chameleon": 32, "csm": 8, "dots1": 32, "ernie4_5": 2,
    "ernie4_5_moe": 4, "evolla": 8, "exaone4": 32, "falcon_h1": 8, "gemma": 16,
    "gemma2": 4, "gemma3": 4, "gemma3_text": 4, "gemma3n": 2, "gemma3n_text": 2,
    "glm": 2, "glm4": 2, "glm4_moe": 8, "glm4v": 2, "glm4v_moe": 8,
    "glm4v_moe_text": 8, "glm4v_text": 2, "gpt_oss": 8, "helium": 20, "jamba": 8,
    "jetmoe": 16, "lfm2": 8, "llama4": 8, "llama4_text": 8, "mimi": 8, "minimax": 8,
    "ministral": 8, "mistral": 8, "mixtral": 8, "phi4_multimodal": 8, "phimoe": 8,
    "qwen2": 32, "qwen2_5_vl": 8, "qwen2_5_vl_text": 8, "qwen2_moe": 16, "qwen2_vl": 8,
    "qwen2_vl_text": 8, "qwen3": 32, "qwen3_moe": 4, "qwen3_next": 2, "qwen3_vl": 32,
    "qwen3_vl_moe": 16, "qwen3_vl_moe_text": 16, "qwen3_vl_text": 32, "seed_oss": 8,
    "smollm3": 4, "stablelm": 32, "starcoder2": 2, "vaultgemma": 4, "zamba": 16,
    # classes only transformers 5.x registers, at 5.24.0 (results/class-defaults-5.json,
    # written by make class-defaults; tests/test_class_defaults.py)
    "EvollaModel": 8, "beam": 8, "canary_decoder": 8, "cosmos3_edge_text": 8,
    "csm_depth_decoder_model": 2, "cwm": 8, "deepseek_ocr2_encoder": 32,
    "deepseek_v4": 1, "dia_decoder": 4, "dia_encoder": 16, "diffusion_gemma_text": 4,
    "dory": 4, "embedding_gemma2_text": 2, "emu3_text_model": 8,
    "ernie4_5_vl_moe_text": 4, "exaone": 8, "exaone4_5_vision": 8, "exaone_moe": 32,
    "flint": 4, "gemma4_text": 4, "gemma4_unified_text": 4, "gemma4_vision": 12,
    "glm_image_text": 2, "glm_ocr_text": 8, "granite_docling_text": 4,
    "granite_swa": 4, "higgs_audio_v2": 8, "hy_v3": 8, "idefics2_perceiver": 4,
    "inkling2_loop_text": 8, "inkling2_text": 8, "inkling_text": 8, "internlm3": 2,
    "iquestcoder": 8, "kolibri1": 4, "laguna": 8, "lara_mini": 4, "lfm2_moe": 8,
    "lfm3": 4, "lfm3_vl_vision": 8, "mellum": 4, "mimi_decoder": 8, "mimi_encoder": 8,
    "mimo_v2_flash": 4, "minimax_m2": 8, "minimax_m3_vl_text": 4, "ministral3": 8,
    "mllama_text_model": 8, "molmo2_adapter": 16, "molmo2_text": 8,
    "molmo2_vision": 16, "moonshine_streaming_encoder": 8, "muse_glimmer_assistant": 8,
    "muse_glimmer_text": 2, "muse_spark_text": 16, "nemotron_h": 8, "neomme": 4,
    "neucodec": 16, "openai_privacy_filter": 2, "paddleocr_vl_text": 2,
    "pocket_tts_audio_tokenizer": 8, "pocket_tts_audio_tokenizer_decoder": 8,
    "pocket_tts_audio_tokenizer_encoder": 8, "qwen2_5_omni_talker": 4,
    "qwen2_5_omni_text": 4, "qwen3_5_moe_text": 2, "qwen3_5_text": 4,
    "qwen3_omni_moe_talker_code_predictor": 8, "qwen3_omni_moe_talker_text": 2,
    "qwen3_omni_moe_text": 4, "qwen4_exp_text": 2, "sarvam_moe": 4, "solar_open": 8,
    "step3p5": 8, "t5_gemma_module": 4, "t5gemma2_decoder": 4, "t5gemma2_text": 4,
    "timesfm2_5": 16, "unlimited_ocr_text": 10, "voxtral_realtime_text": 8,
    "xcodec2": 16, "zaya": 2}


def allowed_layer_types(model_type: str | None) -> tuple[str, ...]:
    """The ``layer_types`` entries a config of ``model_type`` may hold: those
    transformers 4.57.6 allows, and those 5.24.0 allows (a config written for
    either is read)."""
    name = model_type or ""
    if name in MODEL_LAYER_TYPES:
        return MODEL_LAYER_TYPES[name] + tuple(
            t for t in MODEL_LAYER_TYPES_5_24.get(name, ())
            if t not in MODEL_LAYER_TYPES[name])
    return ALLOWED_LAYER_TYPES_4_57 + tuple(
        t for t in ALLOWED_LAYER_TYPES_5_24 if t not in ALLOWED_LAYER_TYPES_4_57) + \
        SAVED_FORM_LAYER_TYPES.get(name, ())


def _installed_allows(entry: str) -> bool:
    """Whether the installed transformers allows ``entry`` (False without it)."""
    try:
        from transformers import configuration_utils
    except Exception:  # not installed, or broken: 4.57.6's set decides
        return False
    return entry in getattr(configuration_utils, "ALLOWED_LAYER_TYPES", ())


def _model_type(name: str, value) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string naming the model's class (e.g. "
                         f"\"llama\"), got {value!r}")


def _window(name: str, value, problems: list) -> None:
    if value is None:
        return
    if isinstance(value, bool) or isinstance(value, str):
        what = "a string" if isinstance(value, str) else "a boolean"
        problems.append(f"{name} must be a positive integer (a number of tokens) or "
                        f"null for none, got {what}, {value!r}"
                        + (": write it without quotes" if isinstance(value, str)
                           and value.strip().isdigit() else ""))
        return
    try:
        _length(name, value)
    except ValueError as error:
        problems.append(f"{error} ({name} is a number of tokens >= 1, or null for "
                        f"no window)")


def _length(name: str, value) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _validate.length(name, value)


def _check(problems: list, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ValueError as error:
        problems.append(str(error))
        return None


def _layer_types(value, model_type: str | None, problems: list,
                 layers=None) -> None:
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        problems.append(f"layer_types must be a list of strings, one per layer, got "
                        f"{value!r}")
        return
    if isinstance(layers, int) and not isinstance(layers, bool) and \
            layers != len(value):  # layer_type_validation (4.57.6 and 5.x)
        problems.append(f"layer_types has {len(value)} entries for "
                        f"num_hidden_layers={layers}: give one entry per layer "
                        f"(transformers raises)")
    allowed = allowed_layer_types(model_type)
    for i, entry in enumerate(value):
        if not isinstance(entry, str):
            problems.append(f"layer_types[{i}] must be a string, got {entry!r}")
            return
        if entry in allowed:
            continue
        if model_type not in MODEL_LAYER_TYPES and entry not in KNOWN_LAYER_TYPES \
                and _installed_allows(entry):
            problems.append(f"layer_types[{i}] is {entry!r}, which the installed "
                            f"transformers allows but posenc_lib does not model (it "
                            f"knows {list(allowed)})")
        elif model_type == "lfm2":  # Lfm2Config checks nothing (4.57.6)
            problems.append(f"layer_types[{i}] is {entry!r}, which model_type 'lfm2' "
                            f"does not run: 4.57.6 builds the config and a cache "
                            f"posenc_lib does not model, 5.x's model fails (KeyError); "
                            f"the entries must be in {list(allowed)}")
        else:
            problems.append(f"layer_types[{i}] is {entry!r}, which transformers "
                            f"refuses for model_type {model_type!r}: the entries must "
                            f"be in {list(allowed)}")
        return


def _heads(text: Mapping, model_type: str | None, problems: list) -> None:
    heads = text.get("num_attention_heads")
    kv = text.get("num_key_value_heads")
    if heads is not None:
        heads = _check(problems, _validate.positive_int, "num_attention_heads", heads)
    if kv is not None:
        kv = _check(problems, _validate.positive_int, "num_key_value_heads", kv)
    if heads and kv and heads % kv:
        problems.append(f"num_key_value_heads ({kv}) must divide num_attention_heads "
                        f"({heads}): each key/value head serves heads // kv_heads "
                        f"query heads (repeat_kv), and transformers' attention fails "
                        f"on the shapes otherwise")
    hidden = text.get("hidden_size")
    if heads and model_type in HIDDEN_DIVISIBLE_5X and hidden is not None:
        hidden = _check(problems, _validate.positive_int, "hidden_size", hidden)
        if hidden and hidden % heads:
            problems.append(
                f"hidden_size ({hidden}) must be a multiple of num_attention_heads "
                f"({heads}) for model_type {model_type!r}: transformers 5.x refuses "
                f"it, while 4.57 floors the head size to {hidden // heads}; the two "
                f"versions would build different models")


def _counts(text: Mapping, problems: list) -> None:
    """Layers, heads and head sizes within :data:`MAX_COUNT`."""
    names = ("num_hidden_layers", "num_attention_heads", "n_head", "num_heads",
             "num_key_value_heads", "head_dim", "qk_rope_head_dim")
    for name in names:
        value = text.get(name)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and \
                value > MAX_COUNT:
            problems.append(f"{name} must be at most {MAX_COUNT:,} (see posenc_lib."
                            f"_validate_config.MAX_COUNT), got {value:,}")
    hidden, heads = text.get("hidden_size"), text.get("num_attention_heads")
    if text.get("head_dim") is None and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
            for v in (hidden, heads)) and hidden // heads > MAX_COUNT:
        problems.append(f"hidden_size // num_attention_heads (the head size) must be "
                        f"at most {MAX_COUNT:,}, got {hidden} // {heads} = "
                        f"{hidden // heads:,}")


def _rope_blocks(text: Mapping):
    """``(name, block)`` for every rope dictionary of the config."""
    scaling, params = text.get("rope_scaling"), text.get("rope_parameters")
    if isinstance(scaling, Mapping):
        yield "rope_scaling", scaling
    if isinstance(params, Mapping):
        nested = bool(params) and all(isinstance(v, Mapping) for v in params.values())
        if nested:
            for kind, entry in params.items():
                yield f"rope_parameters[{kind!r}]", entry
        else:
            yield "rope_parameters", params


def _rope(text: Mapping, problems: list) -> None:
    for name, block in _rope_blocks(text):
        for key in ("rope_type", "type"):
            value = block.get(key)
            if value is not None and not isinstance(value, str):
                problems.append(f"{name}.{key} must be a string naming the method "
                                f"(e.g. \"yarn\"), got {value!r}")
        original = block.get("original_max_position_embeddings")
        if isinstance(original, numbers.Real) and not isinstance(original, bool):
            _check(problems, _cap, f"{name}.original_max_position_embeddings",
                   original)
    scaling = text.get("rope_scaling")
    if isinstance(scaling, Mapping) and text.get("rope_parameters") is None and \
            scaling.get("rope_type") is None and scaling.get("type") is None:
        given = ("is null" if "rope_type" in scaling or "type" in scaling
                 else "is missing")
        near = [k for k in scaling if k not in ("rope_type", "type") and
                _close(k, "rope_type")]
        problems.append(
            f"rope_scaling.rope_type {given}" + (f" (the block has {near[0]!r}: "
                                                  f"misspelt?)" if near else "")
            + f": transformers 4.57 raises for a rope_scaling that does not name "
            f"its method (KeyError: missing required key 'rope_type'). Write "
            f"\"rope_type\": \"default\" (plain RoPE), \"linear\", \"dynamic\", "
            f"\"yarn\", \"llama3\" or \"longrope\", or drop rope_scaling for plain "
            f"RoPE; got {dict(scaling)!r}")


def _close(a: str, b: str) -> bool:
    """Whether ``a`` looks like a misspelling of ``b`` (same letters, or one edit)."""
    if sorted(a) == sorted(b):
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    diffs = sum(x != y for x, y in zip(a, b))
    return diffs + abs(len(a) - len(b)) <= 1


def _cap(name: str, value) -> None:
    """Only the cap of a length (its type is checked where it is read)."""
    if value > _validate.MAX_LENGTH:
        raise ValueError(f"{name} must be at most {_validate.MAX_LENGTH:,} (2**53, the "
                         f"largest integer float64 holds exactly; positions are "
                         f"float64), got {value!r}")


def _text_fields(text: Mapping, model_type: str | None, problems: list) -> None:
    if text.get("use_sliding_window") is not False:  # else transformers ignores it
        _window("sliding_window", text.get("sliding_window"), problems)  # (Qwen2 0)
    _window("attention_chunk_size", text.get("attention_chunk_size"), problems)
    _layer_types(text.get("layer_types"), model_type, problems,
                 text.get("num_hidden_layers"))
    _heads(text, model_type, problems)
    _counts(text, problems)
    for name in ("rope_theta", "rope_local_base_freq"):
        defaults = {**MODEL_DEFAULTS.get(model_type, {}),
                    **LAYER_DEFAULTS.get(model_type, {})}
        if name in text and text[name] is None and name in defaults:
            # the class's default is not used for an explicit null: it is kept
            problems.append(f"{name} is null: transformers keeps the null (it fills "
                            f"in its default only for a missing key) and fails "
                            f"computing the frequencies; give a number, or leave "
                            f"the key out for the class default")
    local = text.get("rope_local_base_freq")
    if local is not None:
        _check(problems, _validate.finite_float, "rope_local_base_freq", local,
               greater_than=1.0)
    for name in ("max_position_embeddings", "original_max_position_embeddings"):
        value = text.get(name)
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            _check(problems, _cap, name, value)
    _rope(text, problems)


def validate_config(config: Mapping) -> None:
    """Raise a ``ValueError`` naming each layout field of ``config`` that is
    wrongly typed or out of range (see the module docstring); one problem is
    reported as it is, several are listed in one message."""
    if not isinstance(config, Mapping):
        return  # _config reports it
    _model_type("model_type", config.get("model_type"))
    text = config.get("text_config")
    model_type = config.get("model_type")
    if isinstance(text, Mapping):
        _model_type("text_config.model_type", text.get("model_type"))
        model_type = text.get("model_type") or model_type
    else:
        text = config
    if isinstance(model_type, str):
        model_type = model_type.removesuffix("_text") if model_type.removesuffix(
            "_text") in MODEL_LAYER_TYPES else model_type
    problems: list[str] = []
    _text_fields(text, model_type, problems)
    if len(problems) == 1:
        raise ValueError(problems[0])
    if problems:
        listed = "; ".join(f"({i}) {m}" for i, m in enumerate(problems, 1))
        raise ValueError(f"config has {len(problems)} problems: {listed}")
